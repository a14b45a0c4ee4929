#include "section_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "parallel.h"

namespace laggard::report {
namespace {

// Row of the step whose [start, end] holds t, or -1.
int step_row(const std::vector<Step>& steps, int rows, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.begin() + rows, t,
                             [](int64_t v, const Step& s) { return v < s.start_ns; });
  if (it == steps.begin()) return -1;
  --it;
  return t <= it->end_ns ? static_cast<int>(it - steps.begin()) : -1;
}

}  // namespace

std::vector<Signal> section_signals(const RunModel& model, const StepSet& steps) {
  const int rows = steps.count();
  const size_t nranks = model.ranks.size();
  if (rows <= 0 || steps.per_rank.size() != nranks) return {};
  // The signals first, named as the ranks meet them (a name's parent: the first rank's) ...
  std::map<std::string, Signal> by_name;
  for (const RankData& r : model.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const SectionWindow& sw : w.sections)
        if (auto [it, fresh] = by_name.try_emplace(sw.name); fresh) {
          it->second.name = sw.name;
          it->second.parent = sw.parent;
        }
  // Every row NaN (the rank does not run it) to begin with, filled on every core: at 100,000
  // ranks the rows are 40 MB a signal of fresh memory.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>*> all_rows;
  for (auto& [name, s] : by_name) {
    s.ns.resize(rows);
    for (std::vector<double>& row : s.ns) all_rows.push_back(&row);
  }
  parallel_for(all_rows.size(), [&](size_t i) { all_rows[i]->assign(nranks, nan); });
  // ... then each rank's column, on every core (issue 29: 15-20 ms of one thread at 10,000 ranks).
  // Blocks of ranks, so that two threads seldom write one cache line of a row.
  constexpr size_t kBlock = 64;
  parallel_for((nranks + kBlock - 1) / kBlock, [&](size_t block) {
    for (size_t r = block * kBlock; r < std::min(nranks, (block + 1) * kBlock); ++r) {
      const std::vector<Step>& rank_steps = steps.per_rank[r];
      for (const CaptureWindow& w : model.ranks[r].windows)
        for (const SectionWindow& sw : w.sections) {
          Signal& s = by_name.find(sw.name)->second;  // find only: the map is read on every core
          if (std::isnan(s.ns[0][r]))
            for (auto& row : s.ns) row[r] = 0;  // the rank runs it: steps without it spent 0
          for (const Occurrence& o : sw.occurrences) {
            const int k = step_row(rank_steps, rows, o.start_ns + o.dur_ns);
            if (k >= 0) s.ns[k][r] += double(o.dur_ns) * std::max(1.0, o.weight);
          }
        }
    }
  });
  std::vector<Signal> out;
  for (auto& [name, s] : by_name) out.push_back(std::move(s));
  return out;
}

}  // namespace laggard::report
