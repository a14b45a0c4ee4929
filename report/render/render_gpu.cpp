#include "render_gpu.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace laggard::report {
namespace {

using nlohmann::json;

std::string score_str(const std::optional<double>& s) { return s ? fmt::format("{:.2f}", *s) : "-"; }
json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string shorten(std::string s, size_t max) {
  if (s.size() <= max) return s;
  return s.substr(0, max - 3) + "...";
}

json score_json(const GpuScore& s) {
  return {{"kernels", s.kernels},
          {"kernel_ms", double(s.kernel_ns) / 1e6},
          {"relative_score", opt(s.relative)},
          {"individual_score", opt(s.individual)}};
}

json sections_json(const std::map<std::string, GpuScore>& m) {
  json o = json::object();
  for (const auto& [name, s] : m) o[name] = score_json(s);
  return o;
}

const char* kind_name(GpuKind k) {
  return k == GpuKind::memcpy ? "memcpy" : k == GpuKind::memset ? "memset" : "kernel";
}

}  // namespace

void render_gpu_text(const RunModel&, const GpuScoreReport& gpu, std::ostream& out) {
  if (!gpu.any) {
    std::set<std::string> statuses;
    for (const RankGpu& r : gpu.ranks)
      if (!r.cupti_status.empty()) statuses.insert(r.cupti_status);
    out << "\nGPU: no kernels captured";
    if (!statuses.empty()) {
      out << " (CUPTI:";
      for (const auto& s : statuses) out << " [" << s << "]";
      out << ")";
    }
    out << '\n';
    return;
  }
  out << "\nGPU (CUPTI; scores as NVRx computes them, NCCL kernels excluded):\n";
  out << fmt::format("  {:>5}  {:<16} {:>9} {:>10} {:>9} {:>9} {:>5} {:>5}  {:>8}  {}\n", "RANK", "HOST", "KERNELS",
                     "KERNEL ms", "NCCL ms", "COPY ms", "REL", "IND", "COMPLETE", "NOTES");
  for (const RankGpu& r : gpu.ranks) {
    if (!r.has_data) {
      out << fmt::format("  {:>5}  {:<16} {}\n", r.rank, r.host,
                         r.cupti_status.empty() ? "(no GPU data)" : "(no GPU data; CUPTI " + r.cupti_status + ")");
      continue;
    }
    std::string notes;
    if (r.cupti_status.rfind("starved", 0) == 0) notes += "CUPTI " + r.cupti_status.substr(0, r.cupti_status.find(':')) + "; ";
    if (r.lost) notes += fmt::format("{} lost; ", r.lost);
    if (r.unmatched) notes += fmt::format("{} unattributed; ", r.unmatched);
    if (r.buffer_full) notes += fmt::format("buffers full {}x; ", r.buffer_full);
    if (r.sampled_windows < r.windows) notes += fmt::format("{}/{} windows sampled; ", r.sampled_windows, r.windows);
    if (r.graph_count) notes += fmt::format("{} in CUDA graphs; ", r.graph_count);
    if (!notes.empty()) notes.resize(notes.size() - 2);
    out << fmt::format("  {:>5}  {:<16} {:>9} {:>10.3f} {:>9.3f} {:>9.3f} {:>5} {:>5}  {:>7.2f}%  {}\n", r.rank,
                       r.host, r.kernel_count, double(r.kernel_ns) / 1e6, double(r.nccl_ns) / 1e6,
                       double(r.memcpy_ns + r.memset_ns) / 1e6, score_str(r.score.relative),
                       score_str(r.score.individual), 100.0 * r.completeness, notes);
  }

  // Per section: the weakest rank by relative GPU score.
  std::set<std::string> sections;
  for (const RankGpu& r : gpu.ranks)
    for (const auto& [name, s] : r.sections) sections.insert(name);
  if (!sections.empty()) {
    out << "\n  GPU scores per section (kernels launched inside it):\n";
    out << fmt::format("  {:<32} {:>5} {:>10} {:>12}  {:<18}\n", "SECTION", "RANKS", "KERNELS", "KERNEL ms/rk",
                       "WORST RANK (REL)");
    for (const std::string& name : sections) {
      int ranks = 0, worst = -1;
      double worst_rel = 2;
      uint64_t kernels = 0;
      int64_t ns = 0;
      for (const RankGpu& r : gpu.ranks) {
        auto it = r.sections.find(name);
        if (it == r.sections.end()) continue;
        ++ranks;
        kernels += it->second.kernels;
        ns += it->second.kernel_ns;
        if (it->second.relative && *it->second.relative < worst_rel) {
          worst_rel = *it->second.relative;
          worst = r.rank;
        }
      }
      out << fmt::format("  {:<32} {:>5} {:>10} {:>12.3f}  {:<18}\n", shorten(name, 32), ranks, kernels,
                         ranks ? double(ns) / 1e6 / ranks : 0.0,
                         worst >= 0 ? fmt::format("{} ({:.2f})", worst, worst_rel) : std::string("-"));
    }
  }

  out << "\n  Top kernels per section (all ranks, by total GPU time):\n";
  for (const auto& [section, kernels] : gpu.top_kernels) {
    out << "  " << section << '\n';
    for (const GpuTopKernel& k : kernels) {
      std::string tag = k.nccl ? " [nccl]" : "";
      out << fmt::format("    {:>10.3f} ms {:>8}x  {}{}\n", double(k.total_ns) / 1e6, k.count,
                         shorten(demangle(k.name), 90), tag);
    }
  }
}

json render_gpu_json(const RunModel&, const GpuScoreReport& gpu) {
  json j;
  j["any"] = gpu.any;
  json ranks = json::array();
  for (const RankGpu& r : gpu.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"cupti", r.cupti_status.empty() ? json(nullptr) : json(r.cupti_status)},
                     {"has_data", r.has_data},
                     {"windows", r.windows},
                     {"sampled_windows", r.sampled_windows},
                     {"kernels", r.kernel_count},
                     {"kernel_ms", double(r.kernel_ns) / 1e6},
                     {"nccl_kernels", r.nccl_count},
                     {"nccl_ms", double(r.nccl_ns) / 1e6},
                     {"memcpy_count", r.memcpy_count},
                     {"memcpy_ms", double(r.memcpy_ns) / 1e6},
                     {"memset_count", r.memset_count},
                     {"memset_ms", double(r.memset_ns) / 1e6},
                     {"graph_kernels", r.graph_count},
                     {"relative_score", opt(r.score.relative)},
                     {"individual_score", opt(r.score.individual)},
                     {"completeness", r.completeness},
                     {"records", r.records},
                     {"lost_records", r.lost},
                     {"unmatched_correlation", r.unmatched},
                     {"buffer_full", r.buffer_full},
                     {"sections", sections_json(r.sections)}});
  j["ranks"] = std::move(ranks);
  json windows = json::array();
  for (size_t k = 0; k < gpu.windows.size(); ++k) {
    json rs = json::array();
    for (const GpuWindowRank& wr : gpu.windows[k])
      rs.push_back({{"rank", wr.rank},
                    {"relative_score", opt(wr.score.relative)},
                    {"individual_score", opt(wr.score.individual)},
                    {"kernels", wr.score.kernels},
                    {"sections", sections_json(wr.sections)}});
    windows.push_back({{"index", k}, {"ranks", rs}});
  }
  j["windows"] = std::move(windows);
  json top = json::object();
  for (const auto& [section, kernels] : gpu.top_kernels) {
    json list = json::array();
    for (const GpuTopKernel& k : kernels)
      list.push_back({{"name", k.name},
                      {"demangled", demangle(k.name)},
                      {"kind", kind_name(k.kind)},
                      {"nccl", k.nccl},
                      {"count", k.count},
                      {"total_ms", double(k.total_ns) / 1e6},
                      {"ranks", k.ranks}});
    top[section] = std::move(list);
  }
  j["top_kernels"] = std::move(top);
  return j;
}

}  // namespace laggard::report
