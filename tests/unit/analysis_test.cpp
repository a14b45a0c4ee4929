// The report's analyses against synthetic runs with one injected fault each: every analysis
// must find exactly the injected rank, step, section and cause, and nothing on a healthy run.
#include <map>
#include <set>
#include <tuple>
#include <gtest/gtest.h>

#include <random>

#include <climits>
#include <sstream>

#include "analyses.h"
#include "breakdown.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "gpu_timeline.h"
#include "jitter.h"
#include "scores.h"
#include "stats.h"
#include "steps.h"
#include "synthetic_run.h"
#include "verdict.h"

namespace laggard::report {
namespace analysis_test {

using synth::Fault;
using synth::Spec;

struct Analysis {
  RunModel model;
  StepSet steps;
  ScoreReport scores;
  JitterReport jitter;
  BreakdownReport breakdown;
  Verdict verdict;
};

// The report's pipeline: section scores, GPU scores (which add GPU stragglers), analyses.
Analysis analyze(const Spec& spec) {
  Analysis a;
  a.model = synth::make_run(spec);
  a.scores = compute_scores(a.model, {});
  GpuScoreReport gpu = compute_gpu_scores(a.model, a.scores);
  CommReport comm = analyze_collectives(a.model, a.scores);
  a.scores.stragglers.insert(a.scores.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  Analyses all = run_analyses(a.model, a.scores, {}, nullptr, gpu, comm);
  a.steps = all.steps;
  a.jitter = all.jitter;
  a.breakdown = all.breakdown;
  a.verdict = all.verdict;
  return a;
}

std::string dump(const Verdict& v) {
  std::string s;
  for (const Finding& f : v.findings) s += std::string(cause_name(f.cause)) + " | " + f.summary + "\n";
  return s;
}

TEST(Steps, FoundFromTheTopLevelSection) {
  Spec spec;
  RunModel m = synth::make_run(spec);
  StepSet s = detect_steps(m, "");
  EXPECT_EQ(s.section, "step");
  EXPECT_EQ(s.count(), spec.steps);
  EXPECT_NE(s.source.find("most frequent"), std::string::npos);
  StepSet named = detect_steps(m, "forward");
  EXPECT_EQ(named.count(), spec.steps);
  EXPECT_EQ(detect_steps(m, "nope").count(), 0);
}

TEST(Steps, FoundFromCollectivesWithoutNvtx) {
  Spec spec;
  RunModel m = synth::make_run(spec);
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows) w.sections.clear();
  StepSet s = detect_steps(m, "");
  EXPECT_EQ(s.count(), spec.steps);  // one collective per step: a period of 1
  EXPECT_NE(s.source.find("NCCL"), std::string::npos);
  // Without the NCCL plugin's records, the NCCL kernels CUPTI saw repeat the same way.
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows) w.collectives.clear();
  EXPECT_EQ(detect_steps(m, "").count(), spec.steps);
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows) w.gpu.clear();
  StepSet none = detect_steps(m, "");
  EXPECT_EQ(none.count(), 0);
  EXPECT_NE(none.source.find("none"), std::string::npos);
}

TEST(Analyses, HealthyRunHasNoFindings) {
  Analysis a = analyze(Spec{});
  EXPECT_TRUE(a.verdict.findings.empty()) << dump(a.verdict);
  ASSERT_TRUE(a.jitter.available) << a.jitter.why_not;
  for (const StepJitter& s : a.jitter.steps) EXPECT_LT(s.worst_divergence_ns, a.jitter.divergence_threshold_ns);
  EXPECT_TRUE(a.scores.stragglers.empty());
}

TEST(Analyses, SlowGpuIsGpuComputeInItsSection) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 5, 1.4, 0, "backward"});
  Analysis a = analyze(spec);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 5);
  EXPECT_EQ(f.host, "node1");
  EXPECT_EQ(f.cause, Cause::gpu_compute) << f.summary;
  EXPECT_EQ(f.section, "backward");
  EXPECT_EQ(f.kind, "persistent");
  EXPECT_GT(f.cause_share, 0.8);
  // The jitter tables point at the same rank: last to arrive, kernels longer, gaps normal.
  const RankJitter& rj = a.jitter.ranks[5];
  EXPECT_GT(rj.last_arrival_share, 0.9);
  EXPECT_GT(rj.duration_excess_ns, 100'000);
  EXPECT_LT(std::abs(rj.gap_excess_ns), 10'000);
  for (const StepJitter& s : a.jitter.steps) EXPECT_EQ(s.worst_rank, 5);
  bool gemm_max = false;
  for (const KernelSlotStats& k : a.jitter.kernels)
    if (k.name == "gemm_bwd_a") gemm_max = k.max_rank == 5;
  EXPECT_TRUE(gemm_max);
  // HTA: more compute time on rank 5 than on any other rank.
  for (const RankBreakdown& rb : a.breakdown.ranks) {
    if (rb.rank == 5) continue;
    EXPECT_LT(rb.types.comp_ns, a.breakdown.ranks[5].types.comp_ns);
  }
}

TEST(Analyses, HostBoundRankIsHost) {
  Spec spec;
  // The host takes longer to issue each launch than the GPU takes to run most kernels.
  spec.faults.push_back({Fault::Kind::host_bound, 2, 1, 300'000, ""});
  Analysis a = analyze(spec);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.cause, Cause::host) << f.summary;
  const RankJitter& rj = a.jitter.ranks[2];
  EXPECT_GT(rj.gap_excess_ns, 100'000);
  EXPECT_LT(std::abs(rj.duration_excess_ns), 10'000);
  EXPECT_GT(rj.near_zero_launch_delay_share, 0.9);  // the GPU waits on every launch
  EXPECT_LT(a.jitter.ranks[0].near_zero_launch_delay_share, 0.5);
  // HTA: its idle time is host wait.
  const RankBreakdown& rb = a.breakdown.ranks[2];
  EXPECT_GT(rb.idle.host_wait_ns, 0.8 * rb.idle.total());
  EXPECT_GT(rb.idle.host_wait_ns, 3 * a.breakdown.ranks[0].idle.host_wait_ns);
}

TEST(Analyses, LateCollectiveLaunchedLateIsHost) {
  Spec spec;
  // Longer than the host's lead over the GPU (~0.8 ms of queued kernels), so it shows.
  spec.faults.push_back({Fault::Kind::late_collective, 6, 1, 1'500'000, ""});
  Analysis a = analyze(spec);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 6);
  EXPECT_EQ(f.cause, Cause::host) << f.summary;
  EXPECT_GT(a.jitter.ranks[6].last_arrival_share, 0.9);
  EXPECT_GT(a.jitter.ranks[6].median_arrival_excess_ns, 500'000);
  EXPECT_LT(std::abs(a.jitter.ranks[6].duration_excess_ns), 10'000);
  // The NCCL plugin's view joins the same finding.
  EXPECT_DOUBLE_EQ(f.evidence.at("comm_last_share"), 1.0);
  EXPECT_NE(f.summary.find("NCCL: it arrives last"), std::string::npos) << f.summary;
}

TEST(Analyses, LateRankFromNcclRecordsAlone) {
  // No CUPTI records: the plugin's collectives still name the culprit, and say the cause is
  // unknown rather than guess.
  Spec spec;
  spec.steps = 30;
  spec.faults.push_back({Fault::Kind::late_collective, 6, 1, 1'500'000, ""});
  RunModel m = synth::make_run(spec);
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows) {
      w.gpu.clear();
      w.kernel_stats.clear();
      w.gpu_sampled = false;
    }
  ScoreReport sc = compute_scores(m, {});
  CommReport comm = analyze_collectives(m, sc);
  sc.stragglers.insert(sc.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  Analyses a = run_analyses(m, sc, {}, nullptr, {}, comm);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 6);
  EXPECT_EQ(f.cause, Cause::unknown);
  EXPECT_DOUBLE_EQ(f.evidence.at("comm_last_share"), 1.0);
  EXPECT_GT(f.impact_ns, 0);
  EXPECT_NE(f.summary.find("no GPU records"), std::string::npos) << f.summary;
}

TEST(Analyses, LateCollectiveLaunchedInTimeIsCommunication) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::late_collective_device, 1, 1, 700'000, ""});
  Analysis a = analyze(spec);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.cause, Cause::communication) << f.summary;
  EXPECT_GT(a.jitter.ranks[1].last_arrival_share, 0.9);
  EXPECT_NEAR(a.jitter.ranks[1].median_arrival_excess_ns, 700'000, 30'000);
}

TEST(Analyses, TransientSlowdownNamesItsSteps) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 3, 2.0, 0, "forward", 10, 15});  // 5 steps
  Analysis a = analyze(spec);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.kind, "transient");
  EXPECT_EQ(f.first_step, 10);
  EXPECT_EQ(f.last_step, 14);
  EXPECT_EQ(f.section, "forward");
  EXPECT_EQ(f.cause, Cause::gpu_compute) << f.summary;
  for (const StepJitter& s : a.jitter.steps) {
    if (s.step >= 10 && s.step < 15) {
      EXPECT_EQ(s.worst_rank, 3);
      EXPECT_GT(s.worst_divergence_ns, a.jitter.divergence_threshold_ns);
      EXPECT_GE(s.first_diverging_slot, 0);
    } else {
      EXPECT_LT(s.worst_divergence_ns, a.jitter.divergence_threshold_ns) << s.step;
    }
  }
}

TEST(Analyses, SlowGpuFromKernelStatisticsAlone) {
  // Only the per-window kernel statistics (no per-kernel records, as in windows that
  // LAGGARD_PROFILING_INTERVAL did not sample): the NVRx GPU score still names rank and section.
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 5, 1.4, 0, "backward"});
  RunModel m = synth::make_run(spec);
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows) {
      w.gpu.clear();
      w.gpu_sampled = false;
    }
  ScoreReport sc = compute_scores(m, {});
  GpuScoreReport gpu = compute_gpu_scores(m, sc);
  Analyses a = run_analyses(m, sc, {}, nullptr, gpu);
  EXPECT_FALSE(a.jitter.available);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 5);
  EXPECT_EQ(f.cause, Cause::gpu_compute);
  EXPECT_EQ(f.section, "backward");
  EXPECT_NEAR(f.evidence.at("gpu_relative_score"), 1 / 1.4, 0.03);
  EXPECT_GT(f.impact_ns, 100'000);  // ~0.17 ms of extra backward kernel time per step
}

TEST(Analyses, OneNoisyStepIsNotAFinding) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 4, 3.0, 0, "", 7, 8});  // a single step
  Analysis a = analyze(spec);
  EXPECT_TRUE(a.verdict.findings.empty()) << dump(a.verdict);
}

TEST(Breakdown, TemporalSharesAddUp) {
  Analysis a = analyze(Spec{});
  ASSERT_TRUE(a.breakdown.available);
  for (const RankBreakdown& rb : a.breakdown.ranks) {
    const Temporal& t = rb.temporal;
    EXPECT_NEAR(t.compute_ns + t.comm_ns + t.memory_ns + t.idle_ns, t.span_ns, 1);
    EXPECT_GT(t.compute_ns, 0);
    EXPECT_GT(t.comm_ns, 0);
    EXPECT_GT(t.memory_ns, 0);
    ASSERT_TRUE(rb.overlap.has_value());
    EXPECT_DOUBLE_EQ(*rb.overlap, 0.0);  // one stream: nothing overlaps
    EXPECT_EQ(rb.launch.with_launch, rb.types.comp + rb.types.comm + rb.types.mem);
  }
  EXPECT_EQ(a.breakdown.top.front().type, "COMM");  // the all-reduce dominates the synthetic step
  EXPECT_EQ(a.breakdown.hosts.size(), 2u);
}

// Steps for fewer ranks than the run has (a StepSet made elsewhere than detect_steps): the jitter
// analysis says it has no steps to compare, as the breakdown counts none, instead of reading past the
// list for the ranks without steps.
TEST(Jitter, StepsForFewerRanksThanTheRunHasAreNoSteps) {
  Spec spec;
  spec.ranks = 4;
  RunModel m = synth::make_run(spec);
  StepSet steps = detect_steps(m, "");
  ASSERT_GT(steps.count(), 0);
  steps.per_rank.pop_back();
  const JitterReport j = analyze_jitter(m, steps);
  EXPECT_FALSE(j.available);
  EXPECT_NE(j.why_not.find("no steps"), std::string::npos) << j.why_not;
}

TEST(Breakdown, NoGpuRecordsSaysWhy) {
  RunModel m;
  m.ranks.push_back(RankData{});
  BreakdownReport b = analyze_breakdown(m, StepSet{});
  EXPECT_FALSE(b.available);
  EXPECT_FALSE(b.why_not.empty());
  JitterReport j = analyze_jitter(m, StepSet{});
  EXPECT_FALSE(j.available);
}

// A kernel position that no rank had before appears in a later step, on ranks of both halves of the
// rank list (each half is grouped on its own core): the jitter analysis gives it a slot then and
// counts it before gathering the step (jitter.cpp, observe_step). Its cross-rank statistics are over
// the ranks that ran it.
TEST(Jitter, AKernelFirstSeenInALaterStepOnSomeRanksGetsItsOwnPosition) {
  Spec spec;
  RunModel m = synth::make_run(spec);
  const StepSet steps = detect_steps(m, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const uint32_t late = m.strings.intern("late_kernel");
  constexpr int kStep = 10;
  std::vector<std::pair<int64_t, int>> durations;  // (duration, rank) of the renamed kernels
  for (size_t r : {1, 2, 5, 6}) {
    const Step& st = steps.per_rank[r][kStep];
    GpuActivity* first = nullptr;  // the step's first compute kernel, by launch
    for (CaptureWindow& w : m.ranks[r].windows)
      for (GpuActivity& a : w.gpu) {
        const int64_t launch = a.api_start_ns ? a.api_start_ns : a.start_ns;
        if (!a.nccl && a.kind == GpuKind::kernel && launch >= st.start_ns && launch < st.end_ns &&
            (!first || launch < (first->api_start_ns ? first->api_start_ns : first->start_ns)))
          first = &a;
      }
    ASSERT_NE(first, nullptr) << "rank " << r;
    first->name = late;
    durations.emplace_back(first->end_ns - first->start_ns, m.ranks[r].rank);
  }
  const JitterReport j = analyze_jitter(m, steps);
  ASSERT_TRUE(j.available) << j.why_not;
  ASSERT_EQ(j.steps.size(), size_t(spec.steps));
  auto it = std::find_if(j.kernels.begin(), j.kernels.end(), [](const KernelSlotStats& k) { return k.name == "late_kernel"; });
  ASSERT_NE(it, j.kernels.end());
  // Ties go to the lowest rank, as the analysis walks the ranks in order.
  std::sort(durations.begin(), durations.end());
  const int64_t shortest = durations.front().first, longest = durations.back().first;
  auto first_rank_with = [&](int64_t d) {
    int rank = INT_MAX;
    for (const auto& [dur, r] : durations)
      if (dur == d) rank = std::min(rank, r);
    return rank;
  };
  EXPECT_DOUBLE_EQ(it->median_duration_ns, (durations[1].first + durations[2].first) / 2.0);
  EXPECT_EQ(it->min_rank, first_rank_with(shortest));
  EXPECT_EQ(it->max_rank, first_rank_with(longest));
  EXPECT_DOUBLE_EQ(it->min_duration_ns, double(shortest));
  EXPECT_DOUBLE_EQ(it->max_duration_ns, double(longest));
  // Every rank is in every step's row, the renamed ranks' cells included.
  for (const std::vector<RankStepJitter>& row : j.matrix)
    for (const RankStepJitter& cell : row) EXPECT_TRUE(cell.present);
}

// For the jitter tests' plain computations from the records.
int64_t launch_of(const GpuActivity& a) { return a.api_start_ns ? a.api_start_ns : a.start_ns; }

// Rank r's activities of step k (sampled windows), in launch order.
std::vector<GpuActivity*> step_activities(RunModel& m, const StepSet& steps, size_t r, int k) {
  std::vector<GpuActivity*> out;
  const Step& st = steps.per_rank[r][k];
  for (CaptureWindow& w : m.ranks[r].windows)
    if (w.gpu_sampled)
      for (GpuActivity& a : w.gpu)
        if (launch_of(a) >= st.start_ns && launch_of(a) < st.end_ns) out.push_back(&a);
  std::stable_sort(out.begin(), out.end(), [](const GpuActivity* a, const GpuActivity* b) { return launch_of(*a) < launch_of(*b); });
  return out;
}

// Each of the rank's activities' idle time before it on its stream (its predecessor by start there),
// as jitter counts it: 0 for NCCL kernels and the first on a stream.
std::map<const GpuActivity*, double> stream_gaps(const RankData& rank) {
  std::vector<const GpuActivity*> acts;
  for (const CaptureWindow& w : rank.windows)
    for (const GpuActivity& a : w.gpu) acts.push_back(&a);
  std::stable_sort(acts.begin(), acts.end(), [](const GpuActivity* a, const GpuActivity* b) {
    return std::tie(a->device, a->stream, a->start_ns) < std::tie(b->device, b->stream, b->start_ns);
  });
  std::map<const GpuActivity*, double> gap;
  for (size_t i = 0; i < acts.size(); ++i) {
    const bool same_stream = i && acts[i - 1]->device == acts[i]->device && acts[i - 1]->stream == acts[i]->stream;
    gap[acts[i]] = acts[i]->nccl || !same_stream ? 0 : std::max<double>(0, double(acts[i]->start_ns - acts[i - 1]->end_ns));
  }
  return gap;
}

// Kernel positions are matched across ranks by (name, n-th launch of that name in the step), whatever
// a rank's earlier steps launched: jitter.cpp's observe reads a position's slot from the rank's
// earlier step while the names repeat, and counts launches from the first difference on. Here ranks'
// steps swap, repeat, rename, rotate and drop kernels, at the first position, in the middle and at
// the end, so steps differ from the one before on some ranks and not on others. Every cell's
// duration excess and every position's cross-rank median are those of a plain count of launches.
TEST(Jitter, KernelsAreMatchedByNameAndOccurrenceWhenStepsDiffer) {
  Spec spec;
  RunModel m = synth::make_run(spec);
  const StepSet steps = detect_steps(m, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const size_t nranks = m.ranks.size();
  auto step_kernels = [&](size_t r, int k) { return step_activities(m, steps, r, k); };
  const uint32_t extra = m.strings.intern("extra_kernel");
  for (size_t r = 0; r < nranks; ++r)
    for (int k = 0; k < spec.steps; ++k) {
      std::vector<GpuActivity*> compute;
      for (GpuActivity* a : step_kernels(r, k))
        if (!a->nccl && a->kind == GpuKind::kernel) compute.push_back(a);
      ASSERT_GE(compute.size(), 3u);
      switch ((r * 7 + size_t(k) * 3) % 6) {
        case 0: break;
        case 1: std::swap(compute.front()->name, compute.back()->name); break;
        case 2: compute[1]->name = compute[0]->name; break;  // a second launch of the first name
        case 3: compute.back()->name = extra; break;
        case 4:  // every name one position on
          for (size_t i = compute.size() - 1; i > 0; --i) std::swap(compute[i]->name, compute[i - 1]->name);
          break;
        case 5: {  // a kernel fewer: this step is shorter than the one before, the next one longer
          const GpuActivity* gone = compute[compute.size() / 2];
          for (CaptureWindow& w : m.ranks[r].windows)
            std::erase_if(w.gpu, [&](const GpuActivity& a) { return &a == gone; });
          break;
        }
      }
    }
  // The plain count: per rank and step, each kernel's (name, occurrence) and duration, in launch order.
  using Key = std::pair<uint32_t, int>;
  struct Seen {
    Key key;
    double dur;
    bool nccl;
  };
  std::vector<std::vector<std::vector<Seen>>> seen(nranks, std::vector<std::vector<Seen>>(spec.steps));
  for (size_t r = 0; r < nranks; ++r)
    for (int k = 0; k < spec.steps; ++k) {
      std::map<uint32_t, int> count;
      for (const GpuActivity* a : step_kernels(r, k))
        seen[r][k].push_back({{a->name, count[a->name]++}, double(a->end_ns - a->start_ns), a->nccl});
    }
  const JitterReport j = analyze_jitter(m, steps);
  ASSERT_TRUE(j.available) << j.why_not;
  ASSERT_EQ(j.matrix.size(), size_t(spec.steps));
  std::map<Key, std::vector<std::pair<double, int>>> per_rank_sums;  // key -> per rank (sum, count)
  for (int k = 0; k < spec.steps; ++k) {
    std::map<Key, std::vector<double>> across;
    for (size_t r = 0; r < nranks; ++r)
      for (const Seen& x : seen[r][k]) across[x.key].push_back(x.dur);
    std::map<Key, double> med;
    for (auto& [key, durs] : across) med[key] = median(durs);
    for (size_t r = 0; r < nranks; ++r) {
      double excess = 0;
      for (const Seen& x : seen[r][k]) {
        excess += x.nccl ? 0 : x.dur - med[x.key];
        auto& sums = per_rank_sums[x.key];
        sums.resize(nranks);
        sums[r].first += x.dur;
        ++sums[r].second;
      }
      EXPECT_NEAR(j.matrix[k][r].duration_excess_ns, excess, 1e-6) << "step " << k << " rank " << r;
    }
  }
  // Each position's median over ranks of the rank's mean over steps, compared name by name.
  std::map<std::string, std::vector<double>> want, got;
  for (const auto& [key, sums] : per_rank_sums) {
    std::vector<double> means;
    for (const auto& [sum, n] : sums)
      if (n) means.push_back(sum / n);
    want[m.strings.at(key.first)].push_back(median(means));
  }
  for (const KernelSlotStats& ks : j.kernels) got[ks.name].push_back(ks.median_duration_ns);
  for (auto* side : {&want, &got})
    for (auto& [name, v] : *side) std::sort(v.begin(), v.end());
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, v] : want) {
    ASSERT_EQ(got[name].size(), v.size()) << name;
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(got[name][i], v[i], 1e-6) << name;
  }
}

// Each step's final time to kernel end (its compute and memory kernels' lengths and the idle time
// on their stream before each, NCCL kernels left out) against a plain computation from the records,
// with steps that follow each other, with or without records between them (jitter.cpp scans a
// rank's records once for all of them), and with steps that overlap (each step's records summed on their own, a record in two steps in both).
// A step whose kernels go back and forth between two sections (jitter.cpp's SectionSums holds the
// section being added to apart and puts it back when the section changes): each cell's excesses by
// section add up to its whole duration excess (less copies' and memsets') and gap excess, as every
// value is a multiple of half a nanosecond and the sums are exact.
TEST(Jitter, ExcessesBySectionAddUpWhenAStepsSectionsInterleave) {
  Spec spec;
  RunModel m = synth::make_run(spec);
  const StepSet steps = detect_steps(m, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const uint32_t sections[2] = {m.strings.intern("even"), m.strings.intern("odd")};
  for (RankData& r : m.ranks) {
    size_t i = 0;
    for (CaptureWindow& w : r.windows)
      for (GpuActivity& a : w.gpu)
        if (!a.nccl && a.kind == GpuKind::kernel) a.section = sections[i++ % 2];
  }
  const JitterReport j = analyze_jitter(m, steps);
  ASSERT_TRUE(j.available) << j.why_not;
  size_t cells = 0;
  for (const std::vector<RankStepJitter>& row : j.matrix)
    for (const RankStepJitter& cell : row) {
      if (!cell.present) continue;
      ++cells;
      ASSERT_EQ(cell.duration_excess_by_section.size(), 2u);
      double by_section = cell.memory_excess_ns, gaps = 0;
      for (const auto& [name, ns] : cell.duration_excess_by_section) by_section += ns;
      for (const auto& [name, ns] : cell.gap_excess_by_section) gaps += ns;
      EXPECT_EQ(by_section, cell.duration_excess_ns);
      EXPECT_EQ(gaps, cell.gap_excess_ns);
    }
  EXPECT_EQ(cells, m.ranks.size() * size_t(spec.steps));
}

TEST(Jitter, EachStepsFinalTtkeIsItsKernelsGapsAndLengths) {
  Spec spec;
  const RunModel m = synth::make_run(spec);
  const StepSet in_order = detect_steps(m, "");
  ASSERT_EQ(in_order.count(), spec.steps);
  StepSet overlapping = in_order;
  for (std::vector<Step>& steps : overlapping.per_rank)
    for (size_t k = 0; k + 1 < steps.size(); ++k)
      steps[k].end_ns = steps[k + 1].start_ns + (steps[k + 1].end_ns - steps[k + 1].start_ns) / 2;
  auto launch = [](const GpuActivity& a) { return a.api_start_ns ? a.api_start_ns : a.start_ns; };
  StepSet with_gaps = in_order;  // each step ends at its middle launch: records between the ranges
  for (size_t r = 0; r < m.ranks.size(); ++r)
    for (Step& st : with_gaps.per_rank[r]) {
      std::vector<int64_t> launches;
      for (const CaptureWindow& w : m.ranks[r].windows)
        for (const GpuActivity& a : w.gpu)
          if (launch(a) >= st.start_ns && launch(a) < st.end_ns) launches.push_back(launch(a));
      std::sort(launches.begin(), launches.end());
      ASSERT_GE(launches.size(), 4u);
      st.end_ns = launches[launches.size() / 2];
    }
  for (const StepSet* steps : std::vector<const StepSet*>{&in_order, &with_gaps, &overlapping}) {
    const JitterReport j = analyze_jitter(m, *steps);
    ASSERT_TRUE(j.available) << j.why_not;
    ASSERT_EQ(j.steps.size(), size_t(spec.steps));
    for (size_t r = 0; r < m.ranks.size(); ++r) {
      std::map<const GpuActivity*, double> gap = stream_gaps(m.ranks[r]);
      std::vector<const GpuActivity*> acts;
      for (const auto& [a, g] : gap) acts.push_back(a);
      std::sort(acts.begin(), acts.end(), [&](const GpuActivity* a, const GpuActivity* b) { return launch(*a) < launch(*b); });
      for (int k = 0; k < spec.steps; ++k) {
        const Step& st = steps->per_rank[r][k];
        double ttke = 0;
        for (const GpuActivity* a : acts)
          if (launch(*a) >= st.start_ns && launch(*a) < st.end_ns && !a->nccl)
            ttke += gap[a] + double(a->end_ns - a->start_ns);
        const double got = j.matrix[k][r].end_divergence_ns + j.steps[k].median_ttke_ns;
        EXPECT_NEAR(got, ttke, 1e-3) << (steps == &in_order ? "in order" : steps == &with_gaps ? "with gaps" : "overlapping")
                                     << " rank " << r << " step " << k;
      }
    }
  }
}

// Steps in which every present rank launched the same kernel positions in the same order (jitter.cpp
// takes their medians position by position, group_in_one_order, and the TTKE medians in blocks of
// positions, ttke_medians_through), between steps that are not: a rank's kernels swapped (two steps
// running), a kernel fewer, a kernel no rank had before, and a rank that launched nothing in a step.
// The worst rank's first divergence in the slow steps lies past the first blocks. Every cell's
// excesses, every step's worst rank and first diverging kernel, and every position's section, against
// a plain computation from the records. `ranks` x `kernels`: 8 x 40 works on one core (too few values
// to wake the others), 128 x 200 on every core (each_maybe_on_every_core).
void check_steps_in_one_order(int ranks, int kernels) {
  Spec spec;
  spec.ranks = ranks;
  spec.kernels.clear();
  for (int i = 0; i < kernels; ++i)
    spec.kernels.push_back({i % 7 == 3 ? "repeated" : "k" + std::to_string(i), i < kernels / 2 ? "forward" : "backward",
                            20'000 + 3'000 * (i % 5)});
  spec.faults.push_back({Fault::Kind::slow_gpu, 3, 1.5, 0, "backward", 4, 9});
  RunModel m = synth::make_run(spec);
  const StepSet steps = detect_steps(m, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const size_t nranks = m.ranks.size();
  auto step_kernels = [&](size_t r, int k) { return step_activities(m, steps, r, k); };
  auto erase = [&](size_t r, const std::vector<GpuActivity*>& gone) {
    for (CaptureWindow& w : m.ranks[r].windows)
      std::erase_if(w.gpu, [&](const GpuActivity& a) { return std::find(gone.begin(), gone.end(), &a) != gone.end(); });
  };
  for (int k : {12, 13}) {
    std::vector<GpuActivity*> s = step_kernels(5, k);
    std::swap(s[0]->name, s[1]->name);
  }
  erase(2, {step_kernels(2, 15)[7]});
  erase(6, step_kernels(6, 18));
  step_kernels(1, 20)[30]->name = m.strings.intern("first_seen_in_step_20");

  // The plain computation: per rank and step, each kernel's (name, occurrence), length, idle time
  // before it on its stream (0 for NCCL kernels) and TTKE, in launch order.
  using Key = std::pair<uint32_t, int>;
  struct Seen {
    Key key;
    double dur, gap, ttke;
    bool nccl;
    size_t pos;
  };
  std::vector<std::vector<std::vector<Seen>>> seen(nranks, std::vector<std::vector<Seen>>(spec.steps));
  for (size_t r = 0; r < nranks; ++r) {
    std::map<const GpuActivity*, double> gap = stream_gaps(m.ranks[r]);
    for (int k = 0; k < spec.steps; ++k) {
      std::map<uint32_t, int> count;
      double ttke = 0;
      for (const GpuActivity* a : step_kernels(r, k)) {
        const double dur = double(a->end_ns - a->start_ns);
        if (!a->nccl) ttke += gap[a] + dur;
        seen[r][k].push_back({{a->name, count[a->name]++}, dur, gap[a], ttke, a->nccl, seen[r][k].size()});
      }
    }
  }
  const JitterReport j = analyze_jitter(m, steps);
  ASSERT_TRUE(j.available) << j.why_not;
  ASSERT_EQ(j.steps.size(), size_t(spec.steps));
  int past_the_first_block = 0, none = 0;
  for (int k = 0; k < spec.steps; ++k) {
    std::map<Key, std::vector<double>> durs, gaps, ttkes, poss;
    std::vector<size_t> present;
    std::vector<double> finals;
    for (size_t r = 0; r < nranks; ++r) {
      if (seen[r][k].empty()) continue;
      present.push_back(r);
      finals.push_back(seen[r][k].back().ttke);
      for (const Seen& x : seen[r][k]) {
        durs[x.key].push_back(x.dur);
        gaps[x.key].push_back(x.gap);
        ttkes[x.key].push_back(x.ttke);
        poss[x.key].push_back(double(x.pos));
      }
    }
    ASSERT_EQ(present.size(), k == 18 ? nranks - 1 : nranks) << "step " << k;
    for (size_t r : present) {
      double de = 0, ge = 0;
      for (const Seen& x : seen[r][k]) {
        de += x.nccl ? 0 : x.dur - median(durs[x.key]);
        ge += x.gap - median(gaps[x.key]);
      }
      EXPECT_NEAR(j.matrix[k][r].duration_excess_ns, de, 1e-6) << "step " << k << " rank " << r;
      EXPECT_NEAR(j.matrix[k][r].gap_excess_ns, ge, 1e-6) << "step " << k << " rank " << r;
    }
    const double median_final = median(finals);
    size_t worst = present[0];
    for (size_t r : present)
      if (seen[r][k].back().ttke - median_final > seen[worst][k].back().ttke - median_final) worst = r;
    EXPECT_EQ(j.steps[k].worst_rank, m.ranks[worst].rank) << "step " << k;
    std::vector<Key> order;  // every position of the step, by key, then by median launch position
    for (const auto& [key, v] : durs) order.push_back(key);
    std::stable_sort(order.begin(), order.end(), [&](const Key& a, const Key& b) { return median(poss[a]) < median(poss[b]); });
    int first = -1;
    std::string kernel;
    for (size_t i = 0; i < order.size() && first < 0; ++i)
      for (const Seen& x : seen[worst][k])
        if (x.key == order[i] && x.ttke - median(ttkes[x.key]) > j.divergence_threshold_ns) {
          first = static_cast<int>(i);
          kernel = m.strings.at(x.key.first);
        }
    EXPECT_EQ(j.steps[k].first_diverging_slot, first) << "step " << k;
    EXPECT_EQ(j.steps[k].first_diverging_kernel, kernel) << "step " << k;
    past_the_first_block += first >= 16;
    none += first < 0;
  }
  EXPECT_GT(past_the_first_block, 0);  // TTKE medians carried over from one block of positions to the next
  EXPECT_GT(none, 0);                  // and every position's asked for
  for (const KernelSlotStats& ks : j.kernels) {
    const auto spec_kernel = std::find_if(spec.kernels.begin(), spec.kernels.end(), [&](const auto& x) { return x.name == ks.name; });
    if (spec_kernel != spec.kernels.end() && ks.name != "repeated") {
      EXPECT_EQ(ks.section, spec_kernel->section) << ks.name;
    }
  }
}

TEST(Jitter, StepsInOneOrderGiveTheMediansOfAPlainComputation) { check_steps_in_one_order(8, 40); }
TEST(Jitter, StepsInOneOrderOnEveryCoreGiveTheMediansOfAPlainComputation) { check_steps_in_one_order(128, 200); }

TEST(Verdict, RobustZ) {
  EXPECT_NEAR(robust_z(10, {1, 2, 3, 4, 5}), (10 - 3) / 1.4826, 1e-9);
  EXPECT_EQ(robust_z(3, {3, 3, 3}), 0);
  EXPECT_GT(robust_z(4, {3, 3, 3, 4}), 100);
}

}  // namespace
}  // namespace laggard::report

#include "cut.h"
#include "diff.h"
#include "render_analyses.h"

namespace laggard::report {
namespace analysis_test {

TEST(Cut, RanksHostsStepsAndSections) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 5, 1.4, 0, "backward"});
  RunModel m = synth::make_run(spec);
  Cut by_host;
  by_host.hosts = {"node0"};
  RunModel h = apply_cut(m, by_host);
  ASSERT_EQ(h.ranks.size(), 4u);
  EXPECT_EQ(h.ranks.back().rank, 3);
  // Without rank 5's host, nobody stands out.
  Analysis none;
  none.model = h;
  none.steps = detect_steps(h, "");
  none.scores = compute_scores(h, {});
  none.jitter = analyze_jitter(h, none.steps);
  none.breakdown = analyze_breakdown(h, none.steps);
  EXPECT_TRUE(decide(h, none.steps, none.scores, none.jitter, none.breakdown).findings.empty());

  Cut steps;
  steps.steps = std::make_pair(3, 5);
  StepSet s = apply_cut(detect_steps(m, ""), steps);
  EXPECT_EQ(s.count(), 3);
  EXPECT_EQ(s.per_rank[0][0].index, 3);
  JitterReport j = analyze_jitter(m, s);
  ASSERT_EQ(j.steps.size(), 3u);
  EXPECT_EQ(j.steps[0].step, 3);  // labelled with the real step number

  Cut sec;
  sec.sections = "^forward$";
  RunModel f = apply_cut(m, sec);
  for (const auto& r : f.ranks)
    for (const auto& w : r.windows) {
      for (const auto& x : w.sections) EXPECT_EQ(x.name, "forward");
      for (const auto& a : w.gpu) EXPECT_EQ(f.strings.at(a.section), "forward");
    }
  Cut bad;
  bad.sections = "(";
  EXPECT_THROW(apply_cut(m, bad), std::invalid_argument);
  EXPECT_EQ(parse_rank_list("0,3,5-7"), (std::set<int>{0, 3, 5, 6, 7}));
  EXPECT_THROW(parse_rank_list("x"), std::invalid_argument);
  EXPECT_EQ(parse_step_range("10:20"), std::make_pair(10, 20));
  EXPECT_EQ(parse_step_range("7"), std::make_pair(7, 7));
  EXPECT_THROW(parse_step_range("9:3"), std::invalid_argument);
}

TEST(Diff, AddedRemovedChanged) {
  Spec base;
  RunModel a = synth::make_run(base);
  Spec changed = base;
  changed.kernels.erase(changed.kernels.begin());               // embedding_fwd removed
  changed.kernels.push_back({"new_kernel", "optimizer", 10'000});  // added
  changed.kernels[4].dur_ns *= 2;                               // gemm_bwd_a doubled (index shifted by one)
  RunModel b = synth::make_run(changed);
  RunDiff d = diff_runs(a, b);
  std::map<std::string, std::string> status;
  for (const DiffEntry& e : d.kernels) status[e.name] = e.status;
  EXPECT_EQ(status["embedding_fwd"], "removed");
  EXPECT_EQ(status["new_kernel"], "added");
  EXPECT_EQ(status["gemm_bwd_a"], "changed");
  EXPECT_EQ(status["gemm_fwd_a"], "same");
  for (const DiffEntry& e : d.sections) EXPECT_NE(e.status, "added") << e.name;
  EXPECT_EQ(d.kernels.front().name, "gemm_bwd_a");  // the biggest change of total time first
  nlohmann::json j = render_diff_json(d);
  EXPECT_EQ(j["kernels"].size(), d.kernels.size());
  // An added or removed kernel has no change of its median: null in JSON, "-" in the text.
  for (const DiffEntry& e : d.kernels)
    if (e.status == "added" || e.status == "removed") {
      EXPECT_FALSE(e.median_change) << e.name;
    }
  for (const auto& k : j["kernels"])
    if (k["status"] == "added" || k["status"] == "removed") {
      EXPECT_TRUE(k["median_change"].is_null()) << k.dump();
    }
  std::ostringstream text;
  render_diff_text(d, 20, text);
  for (const std::string name : {"embedding_fwd", "new_kernel"}) {
    const std::string& t = text.str();
    const size_t at = t.find(name);
    ASSERT_NE(at, std::string::npos) << t;
    const std::string line = t.substr(at, t.find('\n', at) - at);
    EXPECT_NE(line.find(" - "), std::string::npos) << line;
    EXPECT_EQ(line.find('%'), std::string::npos) << line;
  }
}

// Issue 30: an imported trace has no host name; a finding then names "rank 3 (GPU 3)", never
// "rank 3 (host ):".
TEST(Verdict, ARankWithoutAHostNameIsNamedWithoutAnEmptyHost) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::slow_gpu, 3, 1.6, 0, "backward"});
  RunModel m = synth::make_run(spec);
  for (RankData& r : m.ranks) r.host.clear();
  ScoreReport sc = compute_scores(m, {});
  Analyses a = run_analyses(m, sc, {});
  ASSERT_FALSE(a.verdict.findings.empty());
  for (const Finding& f : a.verdict.findings) {
    EXPECT_EQ(f.summary.find("(host "), std::string::npos) << f.summary;
    EXPECT_EQ(f.summary.find("host ,"), std::string::npos) << f.summary;
  }
  EXPECT_EQ(a.verdict.findings[0].summary.rfind("rank 3 ", 0), 0u) << a.verdict.findings[0].summary;
}

// Issue 30: A is the base (100 -> 136 is 36 %, "changed" at a 30 % threshold; it read as 26 %
// against the larger value), and whole counts print as integers.
TEST(Diff, ChangeIsMeasuredAgainstAAndCountsAreWhole) {
  Spec base;
  RunModel a = synth::make_run(base);
  Spec longer = base;
  for (auto& k : longer.kernels)
    if (k.name == "gemm_bwd_a") k.dur_ns = k.dur_ns * 136 / 100;
  RunModel b = synth::make_run(longer);
  RunDiff d = diff_runs(a, b, 0.3);
  const DiffEntry* e = nullptr;
  for (const DiffEntry& k : d.kernels)
    if (k.name == "gemm_bwd_a") e = &k;
  ASSERT_NE(e, nullptr);
  EXPECT_NEAR(e->median_b_ns / e->median_a_ns, 1.36, 0.03);
  ASSERT_TRUE(e->median_change);
  EXPECT_NEAR(*e->median_change, 0.36, 0.03);  // against A; was 0.26 against the larger value
  EXPECT_EQ(e->status, "changed");  // was: "same"
  nlohmann::json j = render_diff_json(d);
  for (const auto& k : j["kernels"]) {
    EXPECT_TRUE(k["count_a"].is_number_integer()) << k.dump();
    if (k["name"] == "gemm_bwd_a") {
      EXPECT_NEAR(k["median_change"].get<double>(), 0.36, 0.03);
    }
  }
  std::ostringstream text;
  render_diff_text(d, 20, text);
  EXPECT_EQ(text.str().find(".0 "), std::string::npos) << text.str();  // was: "24.0      24.0"
  EXPECT_NE(text.str().find("+36 %"), std::string::npos) << text.str();
}

// Issue 30: the same program on a busier machine (every piece of work 8 % longer, well inside the
// spread of its occurrences) is not "changed"; a real change beside it still is.
TEST(Diff, TheSameRunOnABusierMachineIsNotAChange) {
  Spec quiet;
  quiet.gpu = false;
  quiet.jitter = 0.3;
  quiet.kernels = {{"load", "data_load", 2'000'000}, {"fwd", "forward", 5'000'000}, {"bwd", "backward", 9'000'000}};
  Spec busy = quiet;
  busy.seed = 7;
  for (auto& k : busy.kernels) k.dur_ns = k.dur_ns * 108 / 100;
  busy.kernels[2].dur_ns = 9'000'000 * 2;  // backward twice as long: a change
  RunDiff d = diff_runs(synth::make_run(quiet), synth::make_run(busy));  // threshold 0.05
  std::map<std::string, std::string> status;
  for (const DiffEntry& e : d.sections) status[e.name] = e.status;
  EXPECT_EQ(status["data_load"], "same");  // was: "changed" (8 % > 5 %)
  EXPECT_EQ(status["forward"], "same");
  EXPECT_EQ(status["backward"], "changed");
}

TEST(Render, AnalysesJsonHasVerdictAndCuts) {
  Spec spec;
  spec.faults.push_back({Fault::Kind::host_bound, 2, 1, 300'000, ""});
  RunModel m = synth::make_run(spec);
  ScoreReport sc = compute_scores(m, {});
  Analyses a = run_analyses(m, sc, {});
  nlohmann::json j = render_analyses_json(m, a);
  ASSERT_EQ(j["verdict"]["findings"].size(), 1u);
  EXPECT_EQ(j["verdict"]["findings"][0]["rank"], 2);
  EXPECT_EQ(j["verdict"]["findings"][0]["cause"], "host");
  EXPECT_FALSE(j["verdict"]["thresholds"].empty());
  EXPECT_EQ(j["steps"]["count"], spec.steps);
  EXPECT_EQ(j["jitter"]["steps"].size(), size_t(spec.steps));
  EXPECT_EQ(j["jitter"]["steps"][0]["per_rank"].size(), 8u);
  EXPECT_TRUE(j["jitter"]["steps"][0]["per_rank"][2]["by_section"].contains("forward"));
  EXPECT_EQ(j["breakdown"]["ranks"].size(), 8u);
  EXPECT_EQ(j["breakdown"]["hosts"].size(), 2u);
  EXPECT_TRUE(j["breakdown"]["by_section"].contains("backward"));
  std::ostringstream text;
  render_verdict_text(a, text);
  render_analyses_text(m, a, 3, text);
  EXPECT_NE(text.str().find("[host] rank 2"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("Worst ranks"), std::string::npos);
}

}  // namespace
}  // namespace laggard::report

#include "render_trace.h"

namespace laggard::report {
namespace analysis_test {

TEST(Render, ChromeTraceHasEveryRankAndKind) {
  Spec spec;
  spec.ranks = 2;
  spec.steps = 3;
  RunModel m = synth::make_run(spec);
  std::ostringstream out;
  size_t n = render_trace(m, out);
  nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j["traceEvents"].size(), n);
  std::map<std::string, int> cats;
  std::set<int> pids;
  std::set<std::string> thread_names;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X") {
      ++cats[e["cat"].get<std::string>()];
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_GE(e["ts"].get<double>(), 0);
    }
    if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  const int per_step = static_cast<int>(spec.kernels.size());
  EXPECT_EQ(cats["kernel"] + cats["memcpy"] + cats["memset"], 2 * spec.steps * per_step);
  EXPECT_EQ(cats["nccl_kernel"], 2 * spec.steps);
  EXPECT_EQ(cats["nccl"], 2 * spec.steps);
  EXPECT_EQ(cats["nvtx"], 2 * spec.steps * 4);  // step, forward, backward, optimizer
  EXPECT_TRUE(thread_names.count("NCCL (0xc0ffee)"));  // one row per communicator
  EXPECT_TRUE(thread_names.count("GPU 0 stream 7"));
}

// Issue 14: the per-rank GPU timeline is built once, from GpuActivity records or from the
// compact GpuSpans, with flat sort-based stream grouping. Checked against a brute force on
// records spread over windows, devices and streams, with equal start times on one stream.
// Compact: packed in one array of the rank, each window a range of it, as the reader keeps them.
RankData timeline_rank(bool compact) {
  RankData r;
  r.rank = 0;
  if (compact) r.span_chunks.emplace_back();
  uint32_t corr = 0;
  for (int w = 0; w < 3; ++w) {
    CaptureWindow cw;
    cw.index = uint64_t(w);
    cw.start_ns = w * 1'000'000;
    cw.end_ns = (w + 1) * 1'000'000;
    cw.gpu_sampled = true;
    for (int i = 0; i < 40; ++i) {
      GpuActivity a;
      a.correlation = ++corr;
      a.device = (i * 7 + w) % 2;
      a.stream = uint32_t(7 + (i / 2 + w) % 2);
      a.start_ns = cw.start_ns + ((i * 37 + w * 11) % 40) * 1000;  // out of launch order, some equal
      a.end_ns = a.start_ns + 300 + (i % 3) * 500;
      a.api_start_ns = i % 5 ? cw.start_ns + i * 900 : 0;  // every 5th: launch unknown
      a.api_end_ns = a.api_start_ns ? a.api_start_ns + 50 : 0;
      a.nccl = i % 9 == 0;
      a.name = uint32_t(i % 4);
      if (compact) r.span_chunks[0].push_back(span_of(a));
      else cw.gpu.push_back(a);
    }
    if (compact) {
      cw.gpu_spans_first = uint32_t(w * 40);
      cw.gpu_spans_count = 40;
    }
    r.windows.push_back(std::move(cw));
  }
  return r;
}

bool same_span(const GpuSpan& x, const GpuSpan& y) {
  return x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.api_start_ns == y.api_start_ns &&
         x.api_end_ns == y.api_end_ns && x.name == y.name && x.section == y.section && x.stream == y.stream &&
         x.device == y.device && x.kind == y.kind && x.nccl == y.nccl;
}

TEST(GpuTimeline, SameFromRecordsAndSpansAndEachActivityFollowsItsStreamPredecessor) {
  const RankData full = timeline_rank(false), compact = timeline_rank(true);
  const GpuTimeline a = index_gpu(full), b = index_gpu(compact);
  ASSERT_EQ(a.size(), 120u);
  ASSERT_EQ(b.size(), 120u);
  EXPECT_EQ(a.owned.size(), 120u);
  EXPECT_TRUE(b.owned.empty());  // compact spans are read where they are, not copied
  EXPECT_EQ(a.previous, b.previous);
  EXPECT_EQ(a.by_stream, b.by_stream);
  EXPECT_EQ(a.stream_starts, b.stream_starts);
  for (size_t i = 0; i < 120; ++i) {
    EXPECT_TRUE(same_span(a.at(i), b.at(i))) << i;
    if (i) {
      EXPECT_LE(launch_time(a.at(i - 1)), launch_time(a.at(i))) << i;
    }
  }
  EXPECT_EQ(a.stream_starts.size(), 5u);  // 2 devices x 2 streams, and the end
  // Brute force: the activity right before on the same (device, stream), by start, ties by launch position.
  for (size_t i = 0; i < a.size(); ++i) {
    const GpuSpan& x = a.at(i);
    long best = -1;
    for (size_t j = 0; j < a.size(); ++j) {
      const GpuSpan& y = a.at(j);
      if (j == i || y.device != x.device || y.stream != x.stream) continue;
      const bool before = y.start_ns < x.start_ns || (y.start_ns == x.start_ns && j < i);
      if (!before) continue;
      if (best < 0) { best = long(j); continue; }
      const GpuSpan& z = a.at(size_t(best));
      if (y.start_ns > z.start_ns || (y.start_ns == z.start_ns && j > size_t(best))) best = long(j);
    }
    EXPECT_EQ(a.previous[i], best < 0 ? GpuTimeline::kNoPrevious : uint32_t(best)) << i;
  }
}

// Equal launch times keep the files' order (window by window, each window's records in order):
// what the analyses call a step's launch positions must not depend on the sort's whims.
TEST(GpuTimeline, EqualLaunchTimesKeepTheFilesOrder) {
  RankData r;
  for (int w = 0; w < 2; ++w) {
    CaptureWindow cw;
    cw.start_ns = w * 1'000'000;
    cw.end_ns = (w + 1) * 1'000'000;
    cw.gpu_sampled = true;
    for (int i = 0; i < 300; ++i) {
      GpuSpan s;
      s.api_start_ns = 5'000 + (i % 3) * 10;  // three launch times, shared by a hundred records each
      s.api_end_ns = s.api_start_ns + 1;
      s.start_ns = 10'000 + w * 300 + i;
      s.end_ns = s.start_ns + 1;
      s.name = uint32_t(w * 300 + i);  // the files' order
      cw.gpu_spans.push_back(s);
    }
    r.windows.push_back(std::move(cw));
  }
  const GpuTimeline g = index_gpu(r);
  ASSERT_EQ(g.size(), 600u);
  for (size_t i = 1; i < g.size(); ++i) {
    const GpuSpan &x = g.at(i - 1), &y = g.at(i);
    ASSERT_LE(x.api_start_ns, y.api_start_ns) << i;
    if (x.api_start_ns == y.api_start_ns) {
      EXPECT_LT(x.name, y.name) << i;
    }
  }
}

TEST(GpuTimeline, JitterAndBreakdownAreTheSameFromSpansAsFromRecords) {
  Spec spec;
  spec.ranks = 4;
  spec.faults.push_back(Fault{Fault::Kind::slow_gpu, 2, 1.3});
  RunModel full = synth::make_run(spec);
  RunModel compact = full;
  size_t spans = 0;
  for (RankData& r : compact.ranks)
    for (CaptureWindow& w : r.windows) {
      for (const GpuActivity& a : w.gpu) w.gpu_spans.push_back(span_of(a));
      spans += w.gpu_spans.size();
      w.gpu.clear();
    }
  ASSERT_GT(spans, 100u);
  const StepSet steps = detect_steps(full, "");
  const JitterReport ja = analyze_jitter(full, steps), jb = analyze_jitter(compact, steps);
  ASSERT_TRUE(ja.available);
  ASSERT_TRUE(jb.available);
  ASSERT_EQ(ja.kernels.size(), jb.kernels.size());
  for (size_t i = 0; i < ja.kernels.size(); ++i) {
    EXPECT_EQ(ja.kernels[i].name, jb.kernels[i].name);
    EXPECT_EQ(ja.kernels[i].median_duration_ns, jb.kernels[i].median_duration_ns);
    EXPECT_EQ(ja.kernels[i].max_gap_ns, jb.kernels[i].max_gap_ns);
    EXPECT_EQ(ja.kernels[i].max_rank, jb.kernels[i].max_rank);
  }
  ASSERT_EQ(ja.ranks.size(), jb.ranks.size());
  for (size_t r = 0; r < ja.ranks.size(); ++r) {
    EXPECT_EQ(ja.ranks[r].median_end_divergence_ns, jb.ranks[r].median_end_divergence_ns);
    EXPECT_EQ(ja.ranks[r].median_launch_delay_ns, jb.ranks[r].median_launch_delay_ns);
  }
  const BreakdownReport ba = analyze_breakdown(full, steps), bb = analyze_breakdown(compact, steps);
  ASSERT_TRUE(ba.available);
  ASSERT_EQ(ba.ranks.size(), bb.ranks.size());
  for (size_t r = 0; r < ba.ranks.size(); ++r) {
    EXPECT_EQ(ba.ranks[r].temporal.idle_ns, bb.ranks[r].temporal.idle_ns);
    EXPECT_EQ(ba.ranks[r].idle.host_wait_ns, bb.ranks[r].idle.host_wait_ns);
    EXPECT_EQ(ba.ranks[r].types.comp_ns, bb.ranks[r].types.comp_ns);
    EXPECT_EQ(ba.ranks[r].launch.median_delay_ns, bb.ranks[r].launch.median_delay_ns);
  }
}

// Issue 29: the report builds each rank's jitter index as that rank's timeline is built
// (JitterByRank::add in index_gpu_all's callback, on whichever core built it), then moves the
// timelines. The analysis is the same as from timelines built first, whichever ranks were added:
// every cell of the matrix, every rank's summary. A rank without GPU records is among them.
TEST(Jitter, TheSameWhenEachRanksIndexIsBuiltBesideItsTimeline) {
  Spec spec;
  spec.ranks = 6;
  spec.faults.push_back(Fault{Fault::Kind::slow_gpu, 3, 1.3});
  RunModel m = synth::make_run(spec);
  for (CaptureWindow& w : m.ranks[4].windows) w.gpu.clear();
  const StepSet steps = detect_steps(m, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const JitterReport plain = analyze_jitter(m, steps);
  auto same = [&](const JitterReport& j, const char* how) {
    ASSERT_TRUE(j.available) << how << ": " << j.why_not;
    ASSERT_EQ(j.matrix.size(), plain.matrix.size()) << how;
    for (size_t k = 0; k < j.matrix.size(); ++k)
      for (size_t r = 0; r < m.ranks.size(); ++r) {
        const RankStepJitter &a = j.matrix[k][r], &b = plain.matrix[k][r];
        EXPECT_EQ(a.present, b.present) << how << " step " << k << " rank " << r;
        EXPECT_EQ(a.end_divergence_ns, b.end_divergence_ns) << how << " step " << k << " rank " << r;
        EXPECT_EQ(a.duration_excess_ns, b.duration_excess_ns) << how << " step " << k << " rank " << r;
        EXPECT_EQ(a.arrival_ns, b.arrival_ns) << how << " step " << k << " rank " << r;
      }
    ASSERT_EQ(j.ranks.size(), plain.ranks.size()) << how;
    for (size_t r = 0; r < j.ranks.size(); ++r) {
      EXPECT_EQ(j.ranks[r].median_launch_delay_ns, plain.ranks[r].median_launch_delay_ns) << how << " rank " << r;
      EXPECT_EQ(j.ranks[r].median_end_divergence_ns, plain.ranks[r].median_end_divergence_ns) << how << " rank " << r;
      EXPECT_EQ(j.ranks[r].device, plain.ranks[r].device) << how << " rank " << r;
    }
  };
  {
    JitterByRank by_rank(m, steps);
    std::vector<GpuTimeline> timelines = index_gpu_all(m, [&](size_t r, const GpuTimeline& g) { by_rank.add(r, g); });
    std::vector<GpuTimeline> moved;  // each timeline moved to another place; the old ones left empty
    for (GpuTimeline& g : timelines) moved.push_back(std::move(g));
    same(by_rank.finish(moved), "every rank added");
  }
  {
    JitterByRank by_rank(m, steps);
    std::vector<GpuTimeline> timelines = index_gpu_all(m, [&](size_t r, const GpuTimeline& g) {
      if (r % 2) by_rank.add(r, g);
    });
    same(by_rank.finish(timelines), "every other rank added");
  }
  const Analysis a = analyze(spec);
  ASSERT_TRUE(a.jitter.available);
  EXPECT_EQ(a.jitter.steps.size(), size_t(spec.steps));
}

// A rank of summaries only (no sampled window, no record) beside ranks with records: the breakdown
// lists it with its rank and host and nothing else, and counts it nowhere; everything the other
// ranks give is what they give without it (the rank skips the per-rank passes, breakdown.cpp's
// part_without_gpu). Its steps are there, none of them present. A rank whose windows were sampled
// but hold no record is not such a rank: its sampled time is idle.
TEST(Breakdown, ARankWithoutGpuRecordsIsListedAndCountedNowhere) {
  Spec spec;
  spec.ranks = 6;
  spec.faults.push_back(Fault{Fault::Kind::slow_gpu, 3, 1.3});
  RunModel mixed = synth::make_run(spec);
  for (CaptureWindow& w : mixed.ranks[4].windows) {
    w.gpu.clear();
    w.gpu_sampled = false;
  }
  for (CaptureWindow& w : mixed.ranks[2].windows) w.gpu.clear();  // sampled, no record: all idle
  RunModel without = mixed;
  without.ranks.erase(without.ranks.begin() + 4);
  const StepSet steps = detect_steps(mixed, ""), steps_without = detect_steps(without, "");
  ASSERT_EQ(steps.count(), spec.steps);
  const BreakdownReport b = analyze_breakdown(mixed, steps), ref = analyze_breakdown(without, steps_without);
  ASSERT_TRUE(b.available) << b.why_not;
  ASSERT_EQ(b.ranks.size(), 6u);
  const RankBreakdown& none = b.ranks[4];
  EXPECT_EQ(none.rank, mixed.ranks[4].rank);
  EXPECT_EQ(none.host, mixed.ranks[4].host);
  EXPECT_EQ(none.temporal.span_ns + none.temporal.idle_ns, 0);
  EXPECT_EQ(none.idle.total(), 0);
  EXPECT_EQ(none.types.comp + none.types.comm + none.types.mem, 0u);
  EXPECT_EQ(none.launch.with_launch, 0u);
  EXPECT_EQ(none.launch.median_runtime_ns, 0);
  EXPECT_FALSE(none.overlap.has_value());
  EXPECT_GT(b.ranks[2].temporal.idle_ns, 0);  // its windows were sampled: their time is idle
  for (size_t r = 0, i = 0; r < b.ranks.size(); ++r) {
    if (r == 4) continue;
    EXPECT_EQ(b.ranks[r].temporal.idle_ns, ref.ranks[i].temporal.idle_ns) << r;
    EXPECT_EQ(b.ranks[r].launch.median_delay_ns, ref.ranks[i].launch.median_delay_ns) << r;
    ++i;
  }
  ASSERT_EQ(b.steps.size(), ref.steps.size());
  for (size_t k = 0; k < b.steps.size(); ++k) {
    EXPECT_EQ(b.steps[k].step, ref.steps[k].step);
    EXPECT_EQ(b.steps[k].median_idle_share, ref.steps[k].median_idle_share) << k;
    EXPECT_EQ(b.steps[k].max_idle_rank, ref.steps[k].max_idle_rank) << k;
    EXPECT_EQ(b.steps[k].median_host_wait_share, ref.steps[k].median_host_wait_share) << k;
  }
  ASSERT_EQ(b.top.size(), ref.top.size());
  for (size_t i = 0; i < b.top.size(); ++i) {
    EXPECT_EQ(b.top[i].name, ref.top[i].name);
    EXPECT_EQ(b.top[i].total_ns, ref.top[i].total_ns);
    EXPECT_EQ(b.top[i].min_rank, ref.top[i].min_rank);
  }
  EXPECT_EQ(b.by_section.size(), ref.by_section.size());
}

// Issue 29: the breakdown tallies a rank kept in one file's packed array by the reader's labels
// (name, section, type), each counted once, and the rest record by record. Both give the same
// report as the records themselves, to the bit: sums by section, by kernel name and by type, and the
// launch statistics, with records kept whole beside the array (a kernel of over 4.3 s) and names
// seen as two types among them.
TEST(Breakdown, ARankInOnePackedArrayIsTalliedAsItsRecords) {
  Spec spec;
  spec.ranks = 3;
  spec.faults.push_back(Fault{Fault::Kind::slow_gpu, 1, 1.3});
  RunModel full = synth::make_run(spec);
  for (RankData& r : full.ranks)
    for (CaptureWindow& w : r.windows)
      for (size_t i = 0; i < w.gpu.size(); ++i) {
        GpuActivity& a = w.gpu[i];
        if (i % 97 == 5) a.end_ns = a.start_ns + 5'000'000'000;  // kept whole: over 4.3 s
        if (i % 89 == 7) a.kind = GpuKind::memcpy;  // its name is a kernel's elsewhere: two types
      }
  RunModel packed = full;
  size_t kept_whole = 0;
  for (RankData& r : packed.ranks) {
    r.span_chunks.emplace_back();
    SpanChunk& chunk = r.span_chunks[0];
    for (CaptureWindow& w : r.windows) {
      w.gpu_spans_chunk = 0;
      w.gpu_spans_first = uint32_t(chunk.size());
      w.gpu_spans_count = uint32_t(w.gpu.size());
      for (const GpuActivity& a : w.gpu) chunk.push_back(span_of(a));
      w.gpu.clear();
    }
    kept_whole += chunk.escaped.size();
    ASSERT_NE(index_gpu(r).in_chunk, nullptr);  // the labels' path, not the records'
  }
  EXPECT_GT(kept_whole, 0u);
  const StepSet steps = detect_steps(full, "");
  BreakdownOptions every_kernel;
  every_kernel.top_kernels = 100'000;
  const BreakdownReport a = analyze_breakdown(full, steps, every_kernel), b = analyze_breakdown(packed, steps, every_kernel);
  ASSERT_TRUE(a.available);
  ASSERT_TRUE(b.available);
  auto same_types = [](const TypeTotals& x, const TypeTotals& y) {
    return x.comp_ns == y.comp_ns && x.comm_ns == y.comm_ns && x.mem_ns == y.mem_ns && x.comp == y.comp &&
           x.comm == y.comm && x.mem == y.mem;
  };
  ASSERT_EQ(a.by_section.size(), b.by_section.size());
  for (const auto& [section, totals] : a.by_section) {
    ASSERT_TRUE(b.by_section.count(section)) << section;
    EXPECT_TRUE(same_types(totals, b.by_section.at(section))) << section;
  }
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    EXPECT_TRUE(same_types(a.ranks[r].types, b.ranks[r].types)) << r;
    EXPECT_EQ(a.ranks[r].launch.with_launch, b.ranks[r].launch.with_launch) << r;
    EXPECT_EQ(a.ranks[r].launch.short_kernels, b.ranks[r].launch.short_kernels) << r;
    EXPECT_EQ(a.ranks[r].launch.median_delay_ns, b.ranks[r].launch.median_delay_ns) << r;
    EXPECT_EQ(a.ranks[r].launch.p95_delay_ns, b.ranks[r].launch.p95_delay_ns) << r;
    EXPECT_EQ(a.ranks[r].launch.median_runtime_ns, b.ranks[r].launch.median_runtime_ns) << r;
  }
  ASSERT_EQ(a.top.size(), b.top.size());
  std::set<std::string> types;
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].name, b.top[i].name) << i;
    EXPECT_EQ(a.top[i].type, b.top[i].type) << i;
    EXPECT_EQ(a.top[i].count, b.top[i].count) << i;
    EXPECT_EQ(a.top[i].total_ns, b.top[i].total_ns) << i;
    EXPECT_EQ(a.top[i].max_rank, b.top[i].max_rank) << i;
    types.insert(a.top[i].type);
  }
  EXPECT_GT(types.size(), 1u);
}

// Issue 29: the breakdown splits the idle time inside the sampled windows and inside each step in one
// walk over each stream's gaps (breakdown.cpp, split_within). Each range's split is still the one
// split_idle finds for that range alone, to the bit: two devices' streams, gaps across a step's end,
// across windows and across several steps, a kernel running on past the next ones of its stream,
// launch calls ending inside gaps (host wait), short gaps (kernel wait), an empty step, and steps out
// of order (then each step's gaps are looked up on their own). A kernel that runs past a step's end
// while shorter ones start after it on its stream leaves gaps inside that step after an empty one.
TEST(Breakdown, IdleInsideEachWindowAndStepIsThatRangesOwnSplit) {
  for (const bool overlapping : {false, true}) {
    RunModel m;
    RankData r;
    std::mt19937_64 rng(29);
    auto uniform = [&](int64_t lo, int64_t hi) { return lo + int64_t(rng() % uint64_t(hi - lo)); };
    const int64_t window_starts[] = {0, 1'000'000, 2'500'000};  // the last one after a pause: two merged spans
    for (int64_t w0 : window_starts) {
      CaptureWindow w;
      w.start_ns = w0;
      w.end_ns = w0 + 1'000'000;
      w.gpu_sampled = true;
      for (uint32_t stream : {7u, 9u}) {
        int64_t t = w0 + uniform(0, 20'000);
        for (int i = 0; i < 40; ++i) {
          GpuActivity a;
          a.device = int(stream == 9);
          a.stream = stream;
          a.name = uint32_t(i % 5);
          a.start_ns = t;
          a.end_ns = t + (i == 11 ? 150'000 : uniform(1'000, 20'000));  // i == 11 runs past the next ones
          const int64_t gap = uniform(0, 3) == 0 ? uniform(0, 20'000) : uniform(20'000, 60'000);
          if (i % 3 == 0) {  // the launch returned inside the gap before it: host wait
            a.api_end_ns = t - uniform(0, gap + 1);
            a.api_start_ns = a.api_end_ns - 2'000;
          } else if (i % 3 == 1) {
            a.api_start_ns = t - 900'000;
            a.api_end_ns = a.api_start_ns + 3'000;
          }
          w.gpu.push_back(a);
          t = std::max(t + 1, a.end_ns - (i == 11 ? 140'000 : 0)) + gap;
        }
      }
      if (w0 == 0) {  // a third stream: 250-450 us, then two kernels with a host wait between them
        GpuActivity a;
        a.stream = 11;
        a.start_ns = 250'000, a.end_ns = 450'000;
        w.gpu.push_back(a);
        a.start_ns = 255'000, a.end_ns = 260'000;
        w.gpu.push_back(a);
        a.start_ns = 270'000, a.end_ns = 280'000;
        a.api_start_ns = 262'000, a.api_end_ns = 266'000;
        w.gpu.push_back(a);
      }
      r.windows.push_back(std::move(w));
    }
    m.ranks.push_back(std::move(r));
    StepSet steps;
    steps.per_rank.resize(1);
    const std::pair<int64_t, int64_t> spans[] = {{50'000, 300'000},    {300'000, 1'200'000},  {1'200'000, 1'200'000},
                                                 {1'500'000, 3'000'000}, {3'000'000, 3'300'000}};
    for (const auto& [lo, hi] : spans) steps.per_rank[0].push_back(Step{int(steps.per_rank[0].size()), lo, hi});
    if (overlapping) std::swap(steps.per_rank[0][0], steps.per_rank[0][1]);  // out of order, then the first ends last
    const BreakdownOptions opt;
    const BreakdownReport b = analyze_breakdown(m, steps, opt);
    ASSERT_TRUE(b.available) << b.why_not;
    const GpuTimeline g = index_gpu(m.ranks[0]);
    ASSERT_EQ(g.sampled.size(), 2u);
    IdleSplit want;
    for (const Interval& span : g.sampled) want += split_idle(g, span.start, span.end, opt.kernel_wait_ns);
    EXPECT_GT(want.host_wait_ns, 0);
    EXPECT_GT(want.kernel_wait_ns, 0);
    EXPECT_GT(want.other_ns, 0);
    ASSERT_EQ(b.ranks.size(), 1u);
    EXPECT_EQ(b.ranks[0].idle.host_wait_ns, want.host_wait_ns) << overlapping;
    EXPECT_EQ(b.ranks[0].idle.kernel_wait_ns, want.kernel_wait_ns) << overlapping;
    EXPECT_EQ(b.ranks[0].idle.other_ns, want.other_ns) << overlapping;
    ASSERT_EQ(b.steps.size(), 4u) << overlapping;  // the empty step has no share
    size_t with_host_wait = 0;
    for (const StepBreakdown& sb : b.steps) {
      const auto it = std::find_if(steps.per_rank[0].begin(), steps.per_rank[0].end(),
                                   [&](const Step& x) { return x.index == sb.step; });
      ASSERT_NE(it, steps.per_rank[0].end());
      const Step& st = *it;
      const double len = double(st.end_ns - st.start_ns);
      const double host_wait = split_idle(g, st.start_ns, st.end_ns, opt.kernel_wait_ns).host_wait_ns;
      EXPECT_EQ(sb.median_host_wait_share, host_wait / len) << "step " << sb.step << ", overlapping " << overlapping;
      with_host_wait += host_wait > 0;
    }
    EXPECT_EQ(with_host_wait, 4u);
  }
}

// The GPU time by kind is the union of the activities' intervals (compute, then communication, then
// memory, overlaps counted once) whether their starts rise in launch order (merged as they come) or
// not (two streams: gathered and merged at the end). Random activities, touching, empty and
// overlapping, against a count of every covered nanosecond.
TEST(Breakdown, GpuTimeByKindIsTheUnionWhateverOrderTheActivitiesStartIn) {
  std::mt19937 rng(29);
  for (bool starts_rise : {true, false}) {
    for (int round = 0; round < 20; ++round) {
      RunModel m;
      const uint32_t k = m.strings.intern("k");
      RankData r;
      CaptureWindow w;
      w.start_ns = 0;
      w.end_ns = 3'000;
      w.gpu_sampled = true;
      std::vector<GpuActivity> acts;
      for (int i = 0; i < 60; ++i) {
        GpuActivity a;
        a.name = k;
        a.start_ns = 100 + int64_t(rng() % 2'500);
        a.end_ns = a.start_ns + int64_t(rng() % 4 == 0 ? 0 : rng() % 120);  // some empty
        const unsigned kind = rng() % 3;
        a.kind = kind == 2 ? GpuKind::memcpy : GpuKind::kernel;
        a.nccl = kind == 1;
        a.stream = rng() % 2;
        acts.push_back(a);
      }
      std::sort(acts.begin(), acts.end(), [](const GpuActivity& a, const GpuActivity& b) { return a.start_ns < b.start_ns; });
      for (size_t i = 1; i < acts.size(); i += 7) acts[i].start_ns = acts[i - 1].end_ns, acts[i].end_ns = std::max(acts[i].end_ns, acts[i].start_ns);  // touching
      for (size_t i = 0; i < acts.size(); ++i) {  // launch order: by start, or shuffled
        acts[i].api_start_ns = starts_rise ? acts[i].start_ns - 50 + int64_t(i) % 2 : 1 + int64_t(rng() % 50);
        acts[i].api_end_ns = acts[i].api_start_ns + 1;
      }
      if (starts_rise)  // launch times rise too (ties in the files' order)
        for (size_t i = 1; i < acts.size(); ++i)
          acts[i].api_start_ns = std::max(acts[i].api_start_ns, acts[i - 1].api_start_ns), acts[i].api_end_ns = acts[i].api_start_ns + 1;
      w.gpu = acts;
      r.windows.push_back(w);
      m.ranks.push_back(r);
      int64_t compute = 0, comm = 0, memory = 0;
      for (int64_t t = w.start_ns; t < w.end_ns; ++t) {
        bool c = false, n = false, x = false;
        for (const GpuActivity& a : acts)
          if (a.start_ns <= t && t < a.end_ns) (a.kind == GpuKind::kernel && !a.nccl ? c : a.nccl ? n : x) = true;
        compute += c;
        comm += n && !c;
        memory += x && !c && !n;
      }
      const BreakdownReport b = analyze_breakdown(m, StepSet{});
      ASSERT_TRUE(b.available);
      const Temporal& got = b.ranks.at(0).temporal;
      EXPECT_EQ(got.compute_ns, double(compute)) << starts_rise << " round " << round;
      EXPECT_EQ(got.comm_ns, double(comm)) << starts_rise << " round " << round;
      EXPECT_EQ(got.memory_ns, double(memory)) << starts_rise << " round " << round;
    }
  }
}

// The same run with rank 0's first window's records packed into one file array, as the reader keeps them.
RunModel packed_in_one_array(const RunModel& full) {
  RunModel packed = full;
  RankData& p = packed.ranks[0];
  p.span_chunks.emplace_back();
  for (const GpuActivity& a : p.windows[0].gpu) p.span_chunks[0].push_back(span_of(a));
  p.windows[0].gpu_spans_count = uint32_t(p.windows[0].gpu.size());
  p.windows[0].gpu.clear();
  return packed;
}

// A launch call that ends at 0 ns counts as unknown (0 is "unknown" in a GpuSpan), read from a packed
// record as from a whole one (a hostile file's times at the epoch).
TEST(Breakdown, ALaunchCallEndingAtZeroIsUnknownPackedOrNot) {
  RunModel full;
  const uint32_t k = full.strings.intern("k");
  RankData r;
  CaptureWindow w;
  w.start_ns = -1'000;
  w.end_ns = 10'000;
  w.gpu_sampled = true;
  for (int64_t api_start : {-10, 100, 300}) {
    GpuActivity a;
    a.name = k;
    a.api_start_ns = api_start;
    a.api_end_ns = api_start + 10;  // the first ends at 0
    a.start_ns = api_start + 15;
    a.end_ns = a.start_ns + 40;
    w.gpu.push_back(a);
  }
  r.windows.push_back(w);
  full.ranks.push_back(r);
  RunModel packed = packed_in_one_array(full);
  const RankData& p = packed.ranks[0];
  ASSERT_TRUE(p.span_chunks[0].escaped.empty());
  ASSERT_NE(index_gpu(p).in_chunk, nullptr);
  for (const RunModel* m : {&full, &packed}) {
    const BreakdownReport b = analyze_breakdown(*m, StepSet{});
    ASSERT_TRUE(b.available);
    EXPECT_EQ(b.ranks.at(0).launch.with_launch, 2u) << (m == &full ? "records" : "packed");
    EXPECT_EQ(b.ranks.at(0).launch.median_delay_ns, 5) << (m == &full ? "records" : "packed");
  }
}

// A name seen as two types (a hostile or odd file) is listed with its last record's type, whichever
// of its labels was made first and whether that record is packed or kept whole.
TEST(Breakdown, ANameOfTwoTypesTakesItsLastRecordsTypeWhenPacked) {
  for (bool last_kept_whole : {false, true}) {
    RunModel full;
    const uint32_t k = full.strings.intern("k"), other = full.strings.intern("other");
    RankData r;
    r.rank = 0;
    CaptureWindow w;
    w.start_ns = 0;
    w.end_ns = 100'000'000'000;
    w.gpu_sampled = true;
    const GpuKind kinds[] = {GpuKind::kernel, GpuKind::kernel, GpuKind::memcpy, GpuKind::memset};
    const uint32_t names[] = {k, other, k, k};
    for (int i = 0; i < 4; ++i) {
      GpuActivity a;
      a.api_start_ns = 1'000 * (i + 1);
      a.api_end_ns = a.api_start_ns + 10;
      a.start_ns = a.api_start_ns + 100;
      a.end_ns = a.start_ns + (i == 3 && last_kept_whole ? 5'000'000'000 : 50);
      a.name = names[i];
      a.kind = kinds[i];
      w.gpu.push_back(a);
    }
    r.windows.push_back(w);
    full.ranks.push_back(r);
    RunModel packed = packed_in_one_array(full);
    const RankData& p = packed.ranks[0];
    ASSERT_EQ(p.span_chunks[0].escaped.size(), last_kept_whole ? 1u : 0u);
    ASSERT_NE(index_gpu(p).in_chunk, nullptr);
    const StepSet steps = detect_steps(full, "");
    for (const RunModel* m : {&full, &packed}) {
      const BreakdownReport b = analyze_breakdown(*m, steps);
      ASSERT_TRUE(b.available);
      const auto it = std::find_if(b.top.begin(), b.top.end(), [](const TopKernel& t) { return t.name == "k"; });
      ASSERT_NE(it, b.top.end());
      EXPECT_EQ(it->type, "MEM") << (m == &full ? "records" : "packed") << " " << last_kept_whole;
      EXPECT_EQ(it->count, 3u);
    }
  }
}

}  // namespace
}  // namespace laggard::report
