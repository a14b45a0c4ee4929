// Waiting is not work (issue 25): with collectives timed on the host (host_collectives.h), a rank
// that reaches a collective early spends the time until the last rank arrives inside it, and
// inside whatever section encloses it (a synchronous all_reduce in "optimizer", DDP's wait for
// its gradient all-reduce at the end of "backward"). Those sections then look slow on every rank
// but the late one. This file tells the verdict how much of a section's time was such waiting.
#include <algorithm>

#include "host_collectives.h"
#include "stats.h"
#include "verdict_context.h"

namespace laggard::report {
namespace verdict_waiting_detail {  // named: unity batches share anonymous namespaces

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

Intervals merged(const Intervals& sorted) {
  Intervals out;
  for (const auto& iv : sorted) {
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

// Time of [start, end) covered by the merged, sorted intervals.
double covered(const Intervals& waits, int64_t start, int64_t end) {
  auto it = std::upper_bound(waits.begin(), waits.end(), std::make_pair(start, INT64_MAX));
  if (it != waits.begin()) --it;
  double sum = 0;
  for (; it != waits.end() && it->first < end; ++it) sum += double(std::max<int64_t>(0, std::min(end, it->second) - std::max(start, it->first)));
  return sum;
}

}  // namespace verdict_waiting_detail

bool is_waiting_section(const std::string& section) { return parse_host_collective(section); }

double waited_in_section(const VerdictContext& c, size_t r, const std::string& section, int first_row, int last_row) {
  namespace vw = verdict_waiting_detail;
  if (!c.comm || r >= c.comm->host_waits.size() || c.comm->host_waits[r].empty() || r >= c.steps.per_rank.size())
    return 0;
  const vw::Intervals waits = vw::merged(c.comm->host_waits[r]);
  const std::vector<Step>& steps = c.steps.per_rank[r];
  first_row = std::max(first_row, 0);
  last_row = std::min(last_row, static_cast<int>(steps.size()) - 1);
  if (first_row > last_row) return 0;
  std::vector<double> per_row(size_t(last_row - first_row + 1), 0.0);
  for (const CaptureWindow& w : c.model.ranks[r].windows)
    for (const SectionWindow& s : w.sections) {
      if (s.name != section) continue;
      for (const Occurrence& o : s.occurrences) {
        const int64_t end = o.start_ns + o.dur_ns;
        // The step whose host interval holds the occurrence's end, as section_signals counts it.
        auto st = std::lower_bound(steps.begin() + first_row, steps.begin() + last_row + 1, end,
                                   [](const Step& x, int64_t t) { return x.end_ns < t; });
        if (st == steps.begin() + last_row + 1 || st->start_ns > end) continue;
        per_row[size_t(st - steps.begin() - first_row)] += o.weight * vw::covered(waits, o.start_ns, end);
      }
    }
  return median(std::move(per_row));
}

}  // namespace laggard::report
