#include "render_analyses.h"

#include <cmath>

#include "render_gpu.h"
#include "render_nvrx.h"
#include "units.h"

namespace laggard::report {
namespace {

using nlohmann::json;

json temporal_json(const Temporal& t) {
  return {{"span_ms", ms(t.span_ns)}, {"compute_ms", ms(t.compute_ns)}, {"comm_ms", ms(t.comm_ns)},
          {"memory_ms", ms(t.memory_ns)}, {"idle_ms", ms(t.idle_ns)}};
}

json idle_json(const IdleSplit& i) {
  return {{"host_wait_ms", ms(i.host_wait_ns)}, {"kernel_wait_ms", ms(i.kernel_wait_ns)}, {"other_ms", ms(i.other_ns)}};
}

json types_json(const TypeTotals& t) {
  return {{"comp_ms", ms(t.comp_ns)}, {"comm_ms", ms(t.comm_ns)}, {"mem_ms", ms(t.mem_ns)},
          {"comp_count", t.comp}, {"comm_count", t.comm}, {"mem_count", t.mem}};
}

json jitter_step_json(const JitterReport& j, size_t k) {
  const StepJitter& s = j.steps[k];
  json per_rank = json::array();
  for (size_t r = 0; r < j.matrix[k].size(); ++r) {
    const RankStepJitter& c = j.matrix[k][r];
    if (!c.present) continue;
    json by_section = json::object();
    for (auto& [name, v] : c.duration_excess_by_section) by_section[name]["kernel_excess_ms"] = ms(v);
    for (auto& [name, v] : c.gap_excess_by_section) by_section[name]["gap_excess_ms"] = ms(v);
    per_rank.push_back({{"rank", j.ranks[r].rank},
                        {"end_divergence_ms", ms(c.end_divergence_ns)},
                        {"kernel_excess_ms", ms(c.duration_excess_ns)},
                        {"gap_excess_ms", ms(c.gap_excess_ns)},
                        {"memory_excess_ms", ms(c.memory_excess_ns)},
                        {"arrival_ms", c.arrival_ns >= 0 ? json(ms(c.arrival_ns)) : json(nullptr)},
                        {"arrival_excess_ms", ms(c.arrival_excess_ns)},
                        {"last_arrival", c.last_arrival},
                        {"precollective_idle_excess_ms", ms(c.precollective_idle_excess_ns)},
                        {"collective_launched_late", c.collective_launched_late},
                        {"by_section", by_section}});
  }
  return {{"step", s.step},
          {"ranks", s.ranks},
          {"median_ttke_ms", ms(s.median_ttke_ns)},
          {"worst_rank", s.worst_rank},
          {"worst_divergence_ms", ms(s.worst_divergence_ns)},
          {"first_diverging_position", s.first_diverging_slot},
          {"first_diverging_kernel", s.first_diverging_kernel},
          {"step_time_spread_ms", ms(s.step_time_spread_ns)},
          {"per_rank", per_rank}};
}

json jitter_rank_json(const RankJitter& r) {
  return {{"rank", r.rank},
          {"host", r.host},
          {"device", r.device},
          {"median_end_divergence_ms", ms(r.median_end_divergence_ns)},
          {"median_arrival_excess_ms", ms(r.median_arrival_excess_ns)},
          {"last_arrival_share", r.last_arrival_share},
          {"steps_worst", r.steps_worst},
          {"kernel_excess_ms", ms(r.duration_excess_ns)},
          {"gap_excess_ms", ms(r.gap_excess_ns)},
          {"median_launch_delay_ms", ms(r.median_launch_delay_ns)},
          {"near_zero_launch_delay_share", r.near_zero_launch_delay_share},
          {"median_step_ms", ms(r.median_step_ns)}};
}

// Steps (every rank's divergence in each) and ranks are element by element on every core, each
// element a small DOM dumped and freed in its batch; hosts and kernel positions do not grow with
// the ranks and stay whole.
JsonObjectParts jitter_parts(const JitterReport& j) {
  JsonObjectParts out;
  out.add("available", j.available);
  out.add("divergence_threshold_ms", ms(j.divergence_threshold_ns));
  if (!j.available) {
    out.add("why_not", j.why_not);
    return out;
  }
  out.add_written("steps", [&j](JsonWriter& w) {
    // Each step holds every rank: worth a core however few the steps.
    w.parallel_array(
        j.steps.size(), [&](size_t k, JsonWriter& e) { e.value(jitter_step_json(j, k)); }, 2);
  });
  out.add_written("ranks", [&j](JsonWriter& w) {
    w.parallel_array(j.ranks.size(), [&](size_t i, JsonWriter& e) { e.value(jitter_rank_json(j.ranks[i])); });
  });
  json hosts = json::array();
  for (const HostJitter& h : j.hosts)
    hosts.push_back({{"host", h.host}, {"ranks", h.ranks}, {"median_end_divergence_ms", ms(h.median_end_divergence_ns)},
                     {"worst_rank", h.worst_rank}});
  out.add("hosts", std::move(hosts));
  json kernels = json::array();
  for (const KernelSlotStats& k : j.kernels)
    kernels.push_back({{"position", k.slot},
                       {"name", k.name},
                       {"section", k.section},
                       {"nccl", k.nccl},
                       {"median_duration_ms", ms(k.median_duration_ns)},
                       {"min_rank", k.min_rank},
                       {"min_duration_ms", ms(k.min_duration_ns)},
                       {"max_rank", k.max_rank},
                       {"max_duration_ms", ms(k.max_duration_ns)},
                       {"median_gap_ms", ms(k.median_gap_ns)},
                       {"max_gap_rank", k.max_gap_rank},
                       {"max_gap_ms", ms(k.max_gap_ns)}});
  out.add("kernels", std::move(kernels));
  return out;
}

json breakdown_rank_json(const RankBreakdown& r) {
  return {{"rank", r.rank},
          {"host", r.host},
          {"temporal", temporal_json(r.temporal)},
          {"idle", idle_json(r.idle)},
          {"kernel_types", types_json(r.types)},
          {"comm_comp_overlap", r.overlap ? json(*r.overlap) : json(nullptr)},
          {"launch",
           {{"with_launch", r.launch.with_launch},
            {"short_kernels", r.launch.short_kernels},
            {"delay_outliers", r.launch.delay_outliers},
            {"runtime_outliers", r.launch.runtime_outliers},
            {"median_delay_ms", ms(r.launch.median_delay_ns)},
            {"p95_delay_ms", ms(r.launch.p95_delay_ns)},
            {"median_runtime_ms", ms(r.launch.median_runtime_ns)}}}};
}

// The ranks element by element on every core (a small DOM each); the rest does not grow with them.
JsonObjectParts breakdown_parts(const BreakdownReport& b) {
  JsonObjectParts out;
  out.add("available", b.available);
  if (!b.available) {
    out.add("why_not", b.why_not);
    return out;
  }
  out.add("options", {{"kernel_wait_ns", b.options.kernel_wait_ns},
                      {"launch_delay_cutoff_ms", ms(b.options.launch_delay_cutoff_ns)},
                      {"runtime_cutoff_ms", ms(b.options.runtime_cutoff_ns)}});
  out.add_written("ranks", [&b](JsonWriter& w) {
    w.parallel_array(b.ranks.size(), [&](size_t i, JsonWriter& e) { e.value(breakdown_rank_json(b.ranks[i])); });
  });
  json hosts = json::array();
  for (const HostBreakdown& h : b.hosts)
    hosts.push_back({{"host", h.host}, {"ranks", h.ranks}, {"temporal", temporal_json(h.temporal)}, {"idle", idle_json(h.idle)}});
  out.add("hosts", std::move(hosts));
  json steps = json::array();
  for (const StepBreakdown& s : b.steps)
    steps.push_back({{"step", s.step}, {"median_idle_share", s.median_idle_share}, {"max_idle_rank", s.max_idle_rank},
                     {"max_idle_share", s.max_idle_share}, {"median_host_wait_share", s.median_host_wait_share}});
  out.add("steps", std::move(steps));
  json top = json::array();
  for (const TopKernel& k : b.top)
    top.push_back({{"name", k.name}, {"type", k.type}, {"total_ms", ms(k.total_ns)}, {"count", k.count},
                   {"share_of_type", k.share_of_type}, {"min_rank", k.min_rank}, {"min_rank_ms", ms(k.min_rank_ns)},
                   {"max_rank", k.max_rank}, {"max_rank_ms", ms(k.max_rank_ns)}});
  out.add("top_kernels", std::move(top));
  json sections = json::object();
  for (const auto& [name, t] : b.by_section) sections[name] = types_json(t);
  out.add("by_section", std::move(sections));
  return out;
}

json hta_rank_json(const HtaRank& r) {
  json streams = json::object();  // keyed by the stream's number as text ("10" before "2")
  for (const auto& [s, i] : r.idle_by_stream)
    streams[std::to_string(s)] = {{"host_wait_us", i.host_wait_us}, {"kernel_wait_us", i.kernel_wait_us},
                                  {"other_us", i.other_us}};
  return {{"rank", r.rank},
          {"has_gpu", r.has_gpu},
          {"last_profiler_step_dropped", r.last_step_dropped},
          {"temporal",
           {{"idle_us", r.idle_us}, {"compute_us", r.compute_us}, {"non_compute_us", r.non_compute_us},
            {"kernel_time_us", r.kernel_time_us}}},
          {"idle_by_stream", streams},
          {"comp_comm_overlap_pctg", r.overlap_pct ? json(*r.overlap_pct) : json(nullptr)},
          {"launch",
           {{"count", r.launch.count}, {"short_kernels", r.launch.short_kernels},
            {"runtime_outliers", r.launch.runtime_outliers}, {"delay_outliers", r.launch.delay_outliers},
            {"delay_sum_us", r.launch.delay_sum_us}}}};
}

JsonObjectParts hta_parts(const HtaReport& h) {
  JsonObjectParts out;
  out.add("available", h.available);
  out.add("definitions", "HTA's (HolisticTraceAnalysis f4d0062), times in whole µs as HTA computes them");
  out.add("options", {{"consecutive_kernel_delay_us", h.options.consecutive_kernel_delay_us},
                      {"runtime_cutoff_us", h.options.runtime_cutoff_us},
                      {"launch_delay_cutoff_us", h.options.launch_delay_cutoff_us}});
  if (!h.available) out.add("why_not", h.why_not);
  out.add_written("ranks", [&h](JsonWriter& w) {
    w.parallel_array(h.ranks.size(), [&](size_t i, JsonWriter& e) { e.value(hta_rank_json(h.ranks[i])); });
  });
  out.add("kernel_types_us", h.kernel_types_us);
  return out;
}

}  // namespace

JsonObjectParts render_analyses_json_parts(const RunModel&, const Analyses& a) {
  JsonObjectParts out;
  out.add_written("gpu", [&a](JsonWriter& w) { write_gpu_json(w, a.gpu); });
  out.add("steps", {{"source", a.steps.source},
                    {"section", a.steps.section.empty() ? json(nullptr) : json(a.steps.section)},
                    {"count", a.steps.count()}});
  // Built when written, on the text stage, as the other per-rank parts are.
  out.add_written("jitter", [&a](JsonWriter& w) { jitter_parts(a.jitter).write(w); });
  out.add_written("breakdown", [&a](JsonWriter& w) { breakdown_parts(a.breakdown).write(w); });
  if (a.hta) out.add_written("hta", [&a](JsonWriter& w) { hta_parts(*a.hta).write(w); });
  if (a.nvrx) out.add("nvrx", nvrx_json(*a.nvrx));
  json findings = json::array();
  for (const Finding& f : a.verdict.findings)
    findings.push_back({{"rank", f.rank},
                        {"host", f.host},
                        {"device", f.device >= 0 ? json(f.device) : json(nullptr)},
                        {"cause", cause_name(f.cause)},
                        {"kind", f.kind},
                        {"section", f.section.empty() ? json(nullptr) : json(f.section)},
                        {"first_step", f.first_step >= 0 ? json(f.first_step) : json(nullptr)},
                        {"last_step", f.last_step >= 0 ? json(f.last_step) : json(nullptr)},
                        {"impact_ms", ms(f.impact_ns)},
                        {"cause_share", f.cause_share},
                        {"summary", f.summary},
                        {"evidence", f.evidence}});
  json thresholds = json::array();
  for (const Threshold& t : a.verdict.thresholds)
    thresholds.push_back({{"name", t.name}, {"value", t.value}, {"why", t.why}});
  out.add("verdict", {{"findings", findings}, {"thresholds", thresholds}});
  return out;
}

json render_analyses_json(const RunModel& model, const Analyses& a) {
  const JsonObjectParts parts = render_analyses_json_parts(model, a);
  return parsed([&](JsonWriter& w) { parts.write(w); });
}

json render_diff_json(const RunDiff& d) {
  // Per-rank counts: an integer when whole (300, not 300.0).
  auto count = [](double n) { return n == std::floor(n) ? json(static_cast<int64_t>(n)) : json(n); };
  auto entries = [&](const std::vector<DiffEntry>& v) {
    json a = json::array();
    for (const DiffEntry& e : v)
      a.push_back({{"name", e.name}, {"status", e.status}, {"count_a", count(e.count_a)}, {"count_b", count(e.count_b)},
                   {"median_a_ms", ms(e.median_a_ns)}, {"median_b_ms", ms(e.median_b_ns)},
                   {"total_a_ms", ms(e.total_a_ns)}, {"total_b_ms", ms(e.total_b_ns)},
                   {"median_change", e.median_change ? json(*e.median_change) : json(nullptr)},
                   {"spread_ms", ms(e.spread_ns)}});
    return a;
  };
  return {{"run_a", d.run_a}, {"run_b", d.run_b}, {"ranks_a", d.ranks_a}, {"ranks_b", d.ranks_b},
          {"threshold", d.threshold}, {"sections", entries(d.sections)}, {"kernels", entries(d.kernels)}};
}

}  // namespace laggard::report
