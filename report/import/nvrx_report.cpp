// NVRx's ReportGenerator, statistics and report interval, line for line (nvrx_compat.h). Cited
// from NVIDIA/nvidia-resiliency-ext d8686d9c, src/nvidia_resiliency_ext/attribution/straggler/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "nvrx_compat.h"

namespace laggard::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A value through a float32 tensor and back with .item() (torch.full(...) is float32 by default).
double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// Python's float division raises ZeroDivisionError where NVRx would stop; laggard gives NaN instead.
double divide(double a, double b) { return b == 0 ? kNaN : a / b; }

// reporting.py _filter_out_nccl_kernels (l. 330-336): names containing "ncclDev" are dropped.
NvrxSummaries without_nccl(const NvrxSummaries& kernels) {
  NvrxSummaries out;
  for (const auto& [k, v] : kernels)
    if (k.find("ncclDev") == std::string::npos) out.emplace(k, v);
  return out;
}

// reporting.py _compute_gpu_perf_score (l. 219-253): the kernels' reference/median ratios weighted by
// NUM x AVG; kernels without a reference (NaN) skipped; NaN when none is left or there are none.
double gpu_score(const NvrxSummaries& kernels, const std::map<std::string, double>& reference) {
  double weighted = 0, weights = 0;
  int common = 0;
  for (const auto& [k, s] : kernels) {
    auto it = reference.find(k);
    const double ref = it == reference.end() ? kNaN : it->second;
    if (std::isnan(ref)) continue;
    ++common;
    const double weight = s.num * s.avg;
    weighted += divide(ref, s.med) * weight;
    weights += weight;
  }
  return common > 0 ? divide(weighted, weights) : kNaN;
}

// reporting.py _all_reduce_times (l. 255-296): every known name's median packed into a float32
// tensor (-1 where the rank has none), all-reduced with MIN; -1 becomes NaN.
std::map<std::string, double> min_over_ranks(const std::set<std::string>& names, const std::vector<const NvrxSummaries*>& per_rank) {
  std::map<std::string, double> out;
  for (const std::string& n : names) {
    float v = std::numeric_limits<float>::infinity();
    for (const NvrxSummaries* s : per_rank) {
      auto it = s->find(n);
      v = std::min(v, it == s->end() ? -1.0f : static_cast<float>(it->second.med));
    }
    out[n] = per_rank.empty() || v < 0 ? kNaN : static_cast<double>(v);
  }
  return out;
}

}  // namespace

// reporting.py generate_report (l. 421-530) with gather_on_rank0=True and both kinds of score.
NvrxReport NvrxReportGenerator::generate(const std::vector<NvrxRankInput>& ranks) {
  NvrxReport rep;
  std::vector<NvrxSummaries> kernels;
  std::vector<const NvrxSummaries*> kernel_ptrs, section_ptrs;
  for (const NvrxRankInput& in : ranks) kernels.push_back(without_nccl(in.kernels));
  for (size_t i = 0; i < ranks.size(); ++i) {
    kernel_ptrs.push_back(&kernels[i]);
    section_ptrs.push_back(&ranks[i].sections);
    for (const auto& [k, v] : kernels[i]) kernel_names_.insert(k);          // NameMapper.gather_and_assign_ids
    for (const auto& [s, v] : ranks[i].sections) section_names_.insert(s);
  }
  // _maybe_gather_rank_to_node (l. 316-328): gathered once, at the first report.
  if (rank_to_node_.empty())
    for (const NvrxRankInput& in : ranks) rank_to_node_[in.rank] = in.node;
  rep.rank_to_node = rank_to_node_;
  const std::map<std::string, double> min_kernel = min_over_ranks(kernel_names_, kernel_ptrs);
  const std::map<std::string, double> min_section = min_over_ranks(section_names_, section_ptrs);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i].rank;
    // _update_local_min_times (l. 298-314), before the individual scores: a first report scores 1.
    auto& mk = min_kernel_[r];
    auto& ms = min_section_[r];
    for (const auto& [k, s] : kernels[i]) mk[k] = mk.count(k) ? std::min(mk[k], s.med) : s.med;
    for (const auto& [n, s] : ranks[i].sections) ms[n] = ms.count(n) ? std::min(ms[n], s.med) : s.med;
    // _get_tensor_from_scores / _gather_results_on_rank0 (l. 338-419): every score through a float32
    // tensor, NaN for each known section the rank has no summary of.
    rep.gpu_individual[r] = f32(gpu_score(kernels[i], mk));
    rep.gpu_relative[r] = f32(gpu_score(kernels[i], min_kernel));
    for (const std::string& n : section_names_) {
      auto it = ranks[i].sections.find(n);
      const bool has = it != ranks[i].sections.end();
      // _compute_sections_perf_scores (l. 196-217): reference / this rank's median.
      rep.section_individual[n][r] = has ? f32(divide(ms[n], it->second.med)) : kNaN;
      rep.section_relative[n][r] = has ? f32(divide(min_section.at(n), it->second.med)) : kNaN;
    }
  }
  return rep;
}

// reporting.py Report.identify_stragglers (l. 84-157): strictly below the threshold (NaN never is).
NvrxStragglers nvrx_identify_stragglers(const NvrxReport& r, const NvrxThresholds& t) {
  NvrxStragglers out;
  auto node = [&](int rank) {
    auto it = r.rank_to_node.find(rank);
    return it == r.rank_to_node.end() ? std::string("<unk>") : it->second;  // defaultdict(lambda: '<unk>')
  };
  for (const auto& [rank, d] : r.gpu_relative)
    if (d < t.gpu_relative) out.gpus_relative.insert({rank, node(rank)});
  for (const auto& [rank, d] : r.gpu_individual)
    if (d < t.gpu_individual) out.gpus_individual.insert({rank, node(rank)});
  auto sections = [&](const auto& scores, double threshold, auto& into) {
    for (const auto& [section, per_rank] : scores) {
      std::set<NvrxStragglerId> ids;
      for (const auto& [rank, d] : per_rank)
        if (d < threshold) ids.insert({rank, node(rank)});
      if (!ids.empty()) into[section] = std::move(ids);
    }
  };
  sections(r.section_relative, t.section_relative, out.sections_relative);
  sections(r.section_individual, t.section_individual, out.sections_individual);
  return out;
}

// straggler.py Detector._get_section_summaries (l. 180-197): torch.median of a float64 tensor is
// the lower middle value; mean over the samples.
NvrxStat nvrx_section_stat(std::vector<double> elapsed_ms) {
  NvrxStat s;
  s.num = double(elapsed_ms.size());
  if (elapsed_ms.empty()) return s;
  s.avg = std::accumulate(elapsed_ms.begin(), elapsed_ms.end(), 0.0) / s.num;
  const size_t mid = (elapsed_ms.size() - 1) / 2;
  std::nth_element(elapsed_ms.begin(), elapsed_ms.begin() + long(mid), elapsed_ms.end());
  s.med = elapsed_ms[mid];
  return s;
}

// cupti_src/CuptiProfiler.cpp computeStats (l. 44-74), in float: the mean of the two middle values
// for an even count, the average accumulated from 0.0f.
NvrxStat nvrx_kernel_stat(std::vector<float> dur_us) {
  NvrxStat s;
  const size_t n = dur_us.size();
  s.num = double(n);
  if (n == 0) return s;
  std::sort(dur_us.begin(), dur_us.end());
  const float med = n % 2 == 0 ? (dur_us[n / 2 - 1] + dur_us[n / 2]) / 2 : dur_us[n / 2];
  const float avg = std::accumulate(dur_us.begin(), dur_us.end(), 0.0f) / static_cast<float>(n);
  s.med = med;
  s.avg = avg;
  return s;
}

// CuptiProfiler.cpp l. 191: (kernel->end - kernel->start) / 1000.0f, a uint64 divided as float.
float nvrx_kernel_us(int64_t dur_ns) {
  return static_cast<float>(static_cast<uint64_t>(std::max<int64_t>(0, dur_ns))) / 1000.0f;
}

// CuptiProfiler.cpp l. 172, 186-189: "%s_blk_%d_%d_%d_grid_%d_%d_%d" into a 4096-byte buffer.
std::string nvrx_kernel_key(const std::string& name, const uint32_t block[3], const uint32_t grid[3]) {
  char buf[4096];
  std::snprintf(buf, sizeof buf, "%s_blk_%d_%d_%d_grid_%d_%d_%d", name.c_str(), int(block[0]), int(block[1]),
                int(block[2]), int(grid[0]), int(grid[1]), int(grid[2]));
  return buf;
}

// interval_tracker.py _gather_report_interval (l. 41-56): float32 median (torch.median: the lower
// middle) of the first INTERVAL_ESTIMATION_ITERS = 16 step times, time_interval / median in float32
// (as torch computes a number divided by a tensor: the tensor's reciprocal times the number),
// the largest over ranks (all-reduce MAX), at least profiling_interval, truncated by int().
int nvrx_iter_interval(const std::vector<std::vector<double>>& step_times_s, double time_interval_s,
                       int profiling_interval) {
  constexpr size_t kEstimationIters = 16;
  float most = -std::numeric_limits<float>::infinity();
  for (const std::vector<double>& times : step_times_s) {
    if (times.size() < kEstimationIters) return 0;
    std::vector<float> t;
    for (size_t i = 0; i < kEstimationIters; ++i) t.push_back(static_cast<float>(times[i]));
    std::nth_element(t.begin(), t.begin() + (kEstimationIters - 1) / 2, t.end());
    const float median = t[(kEstimationIters - 1) / 2];
    // `time_interval / tensor` is Tensor.__rdiv__: self.reciprocal() * other, in float32.
    most = std::max(most, (1.0f / median) * static_cast<float>(time_interval_s));
  }
  if (step_times_s.empty()) return 0;
  const double v = std::max(static_cast<double>(most), double(profiling_interval));
  return v >= double(std::numeric_limits<int>::max()) || std::isnan(v) ? std::numeric_limits<int>::max()
                                                                       : static_cast<int>(v);
}

}  // namespace laggard::report
