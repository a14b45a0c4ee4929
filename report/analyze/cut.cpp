#include "cut.h"

#include <re2/re2.h>

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "stats.h"

namespace laggard::report {

namespace {

// Drops the window's compact GPU spans `drop` says, wherever they are kept (RankData::spans_of):
// in its rank's array the kept ones move to the front of the window's range.
template <class Drop>
void erase_spans_if(RankData& r, CaptureWindow& w, Drop drop) {
  std::erase_if(w.gpu_spans, drop);
  if (!w.gpu_spans_count) return;
  SpanChunk& chunk = r.span_chunks[w.gpu_spans_chunk];
  size_t kept = w.gpu_spans_first;
  for (size_t i = w.gpu_spans_first; i < w.gpu_spans_first + w.gpu_spans_count; ++i) {
    if (drop(chunk.at(i))) continue;
    if (kept != i) chunk.move_record(i, kept);  // a record's times depend on its position's block
    ++kept;
  }
  w.gpu_spans_count = static_cast<uint32_t>(kept - w.gpu_spans_first);
}

}  // namespace

std::set<int> parse_rank_list(const std::string& text) {
  std::set<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t dash = item.find('-', 1);
    try {
      size_t used = 0;
      int lo = std::stoi(item, &used);
      int hi = lo;
      if (dash != std::string::npos) hi = std::stoi(item.substr(dash + 1));
      else if (used != item.size()) throw std::invalid_argument("");
      if (lo < 0 || hi < lo || hi - lo > 1'000'000) throw std::invalid_argument("");
      for (int r = lo; r <= hi; ++r) out.insert(r);
    } catch (const std::exception&) {
      throw std::invalid_argument("bad rank list '" + text + "' (e.g. 0,3,5-7)");
    }
  }
  if (out.empty()) throw std::invalid_argument("empty rank list");
  return out;
}

std::pair<int, int> parse_step_range(const std::string& text) {
  size_t sep = text.find_first_of(":-", 1);
  try {
    if (sep == std::string::npos) {
      int k = std::stoi(text);
      if (k < 0) throw std::invalid_argument("");
      return {k, k};
    }
    int a = std::stoi(text.substr(0, sep)), b = std::stoi(text.substr(sep + 1));
    if (a < 0 || b < a) throw std::invalid_argument("");
    return {a, b};
  } catch (const std::exception&) {
    throw std::invalid_argument("bad step range '" + text + "' (e.g. 10:20)");
  }
}

RunModel apply_cut(const RunModel& model, const Cut& cut) {
  if (cut.ranks.empty() && cut.hosts.empty() && cut.sections.empty()) return model;
  // RE2 (linear time, no recursion), as LAGGARD_SECTIONS at capture: std::regex on section
  // names from files could take exponential time or overflow the stack (issue 24).
  std::optional<RE2> re;
  if (!cut.sections.empty()) {
    RE2::Options options;
    options.set_log_errors(false);
    re.emplace(cut.sections, options);
    if (!re->ok()) throw std::invalid_argument("bad section regex '" + cut.sections + "': " + re->error());
  }
  auto keep = [&](const std::string& name) { return RE2::PartialMatch(name, *re); };
  RunModel out = model;
  out.ranks.clear();
  for (const RankData& r : model.ranks) {
    if (!cut.ranks.empty() && !cut.ranks.count(r.rank)) continue;
    if (!cut.hosts.empty() && !cut.hosts.count(r.host)) continue;
    RankData copy = r;
    if (re) {
      for (CaptureWindow& w : copy.windows) {
        std::erase_if(w.sections, [&](const SectionWindow& s) { return !keep(s.name); });
        std::erase_if(w.gpu, [&](const GpuActivity& a) {
          return a.section == StringTable::kNone || !keep(model.strings.at(a.section));
        });
        erase_spans_if(copy, w, [&](const GpuSpan& a) {
          return a.section == StringTable::kNone || !keep(model.strings.at(a.section));
        });
        std::erase_if(w.kernel_stats, [&](const KernelWindowStats& k) {
          return k.section == StringTable::kNone || !keep(model.strings.at(k.section));
        });
      }
    }
    out.ranks.push_back(std::move(copy));
  }
  return out;
}

namespace {

// Keeps the occurrences starting in [t0, t1]; the exact aggregates are recomputed from what is
// kept when anything was cut (sampled occurrences keep their weight).
bool cut_section(SectionWindow& s, int64_t t0, int64_t t1) {
  const size_t before = s.occurrences.size();
  std::erase_if(s.occurrences, [&](const Occurrence& o) { return o.start_ns < t0 || o.start_ns > t1; });
  if (s.occurrences.size() == before) return true;
  if (s.occurrences.empty()) return false;
  double n = 0, total = 0;
  std::vector<std::pair<double, double>> durs;
  s.min_ns = INT64_MAX;
  s.max_ns = 0;
  for (const Occurrence& o : s.occurrences) {
    n += o.weight;
    total += double(o.dur_ns) * o.weight;
    s.min_ns = std::min(s.min_ns, o.dur_ns);
    s.max_ns = std::max(s.max_ns, o.dur_ns);
    durs.emplace_back(double(o.dur_ns), o.weight);
  }
  s.count = static_cast<uint64_t>(n + 0.5);
  s.total_ns = static_cast<int64_t>(std::min(total, 9e18));
  s.median_ns = static_cast<int64_t>(lower_weighted_median(durs));
  return true;
}

void cut_rank_to(RankData& r, int64_t t0, int64_t t1) {
  std::erase_if(r.windows, [&](const CaptureWindow& w) { return w.end_ns < t0 || w.start_ns > t1; });
  for (CaptureWindow& w : r.windows) {
    const int64_t middle = w.start_ns + (w.end_ns - w.start_ns) / 2;
    if (middle < t0 || middle > t1) w.kernel_stats.clear();
    w.start_ns = std::max(w.start_ns, t0);
    w.end_ns = std::min(w.end_ns, t1);
    std::erase_if(w.sections, [&](SectionWindow& s) { return !cut_section(s, t0, t1); });
    std::erase_if(w.gpu, [&](const GpuActivity& a) { return a.start_ns < t0 || a.start_ns > t1; });
    erase_spans_if(r, w, [&](const GpuSpan& a) { return a.start_ns < t0 || a.start_ns > t1; });
    std::erase_if(w.collectives, [&](const Collective& c) {
      const int64_t t = c.gpu_start_ns ? c.gpu_start_ns : c.upload_start_ns;  // upload: only without GPU time
      return t < t0 || t > t1;
    });
  }
}

std::string ranges_text(const std::set<int>& v) {
  std::string out;
  for (auto it = v.begin(); it != v.end();) {
    int a = *it, b = a;
    while (++it != v.end() && *it == b + 1) b = *it;
    out += (out.empty() ? "" : ",") + (a == b ? std::to_string(a) : fmt::format("{}-{}", a, b));
  }
  return out;
}

}  // namespace

RunModel cut_to_steps(const RunModel& model, const StepSet& steps, std::pair<int, int> range) {
  RunModel out = model;
  for (size_t i = 0; i < out.ranks.size(); ++i) {
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    if (i < steps.per_rank.size())
      for (const Step& s : steps.per_rank[i])
        if (s.index >= range.first && s.index <= range.second) {
          t0 = std::min(t0, s.start_ns);
          t1 = std::max(t1, s.end_ns);
        }
    if (t0 > t1) out.ranks[i].windows.clear();
    else cut_rank_to(out.ranks[i], t0, t1);
  }
  return out;
}

std::vector<std::string> cut_warnings(const RunModel& model, const Cut& cut) {
  std::set<int> ranks, absent;
  std::set<std::string> hosts;
  for (const RankData& r : model.ranks) {
    ranks.insert(r.rank);
    hosts.insert(r.host);
  }
  for (int r : cut.ranks)
    if (!ranks.count(r)) absent.insert(r);
  std::vector<std::string> out;
  if (!absent.empty())
    out.push_back(fmt::format("--ranks: the run has no rank {} (it has ranks {})", ranges_text(absent),
                              ranks.empty() ? "none" : ranges_text(ranks)));
  for (const std::string& h : cut.hosts)
    if (!hosts.count(h)) out.push_back("--hosts: the run has no host '" + h + "'");
  return out;
}

std::string describe_cut(const Cut& cut, const StepSet& steps) {
  std::vector<std::string> parts;
  if (!cut.ranks.empty()) parts.push_back("ranks " + ranges_text(cut.ranks));
  if (!cut.hosts.empty()) {
    std::string h;
    for (const auto& x : cut.hosts) h += (h.empty() ? "" : ",") + x;
    parts.push_back("hosts " + h);
  }
  if (cut.steps)
    parts.push_back(fmt::format("steps {}-{} (each rank's own steps, from {}: its NVTX sections, kernels and NCCL "
                                "operations that started in them)",
                                cut.steps->first, cut.steps->second, steps.source));
  if (!cut.sections.empty())
    parts.push_back("NVTX sections matching '" + cut.sections + "' and the kernels launched in them (NCCL operations "
                    "are not cut by section)");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

StepSet apply_cut(StepSet steps, const Cut& cut) {
  if (!cut.steps) return steps;
  StepSet out = std::move(steps);
  for (auto& rs : out.per_rank) {
    std::vector<Step> kept;
    for (const Step& s : rs)
      if (s.index >= cut.steps->first && s.index <= cut.steps->second) kept.push_back(s);
    rs = std::move(kept);
  }
  out.source += ", steps " + std::to_string(cut.steps->first) + "-" + std::to_string(cut.steps->second);
  return out;
}

}  // namespace laggard::report
