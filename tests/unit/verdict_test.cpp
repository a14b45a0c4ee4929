// The evidence-based verdict (issue 13, issue 10 item 10): every fault of the issue's table,
// reproduced on a CPU-only synthetic stand-in for its training loop, is found with its exact
// rank, section and step range; healthy runs stay clean; the excess statistics on their own.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <set>

#include "analyses.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "excess.h"
#include "scores.h"
#include "section_steps.h"
#include "synthetic_run.h"
#include "verdict.h"

namespace laggard::report {
namespace verdict_test {

using synth::Fault;
using synth::Spec;

// The issue's loop: train_step ~15.5 ms = data_load 1 + forward 4 + backward 8 + optimizer 2
// (+ launch gaps), 4 ranks, 40 steps, +-2 % noise on every piece of work, no GPU.
Spec issue13_spec(uint64_t seed = 42) {
  Spec s;
  s.gpu = false;
  s.ranks = 4;
  s.steps = 40;
  s.jitter = 0.02;
  s.seed = seed;
  s.step_gap_ns = 300'000;
  s.window_s = 0.1;
  s.kernels = {{"load", "data_load", 1'000'000},
               {"fwd", "forward", 4'000'000},
               {"bwd", "backward", 8'000'000},
               {"opt", "optimizer", 2'000'000}};
  return s;
}

Fault slow(int rank, const std::string& section, double factor, int first = 0, int last = 1 << 30) {
  return {Fault::Kind::slow_gpu, rank, factor, 0, section, first, last};
}

Verdict verdict_of(const Spec& spec) {
  RunModel m = synth::make_run(spec);
  ScoreReport sc = compute_scores(m, {});
  return run_analyses(m, sc, {}).verdict;
}

std::string dump(const Verdict& v) {
  std::string s;
  for (const Finding& f : v.findings) s += f.kind + " | " + f.summary + "\n";
  return s;
}

void expect_one(const Verdict& v, int rank, const std::string& section, int first = -1, int last = -1,
                double min_share = 0.02) {
  ASSERT_EQ(v.findings.size(), 1u) << dump(v);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.rank, rank) << dump(v);
  EXPECT_EQ(f.section, section) << dump(v);
  EXPECT_EQ(f.first_step, first) << dump(v);
  EXPECT_EQ(f.last_step, last) << dump(v);
  EXPECT_EQ(f.kind, first < 0 ? "persistent" : "transient");
  // How sure, and what it cost.
  EXPECT_GT(f.evidence.at("z"), 4.0);
  EXPECT_GT(f.evidence.at("noise_ms"), 0);
  EXPECT_GE(f.evidence.at("lost_share_of_step"), min_share);
  EXPECT_EQ(f.steps_affected, first < 0 ? 40 : last - first + 1);
  EXPECT_NE(f.summary.find("the job loses"), std::string::npos) << f.summary;
  EXPECT_EQ(f.cause, Cause::unknown);  // CPU time only
}

TEST(Issue13, Backward110IsFound) {
  Spec s = issue13_spec();
  s.faults = {slow(2, "backward", 1.10)};
  expect_one(verdict_of(s), 2, "backward");
}

TEST(Issue13, Backward125IsFound) {
  Spec s = issue13_spec();
  s.faults = {slow(1, "backward", 1.25)};
  Verdict v = verdict_of(s);
  expect_one(v, 1, "backward");
  EXPECT_NEAR(v.findings[0].impact_ns, 2'000'000, 200'000);
}

TEST(Issue13, Forward13IsFound) {
  Spec s = issue13_spec();
  s.faults = {slow(3, "forward", 1.3)};
  expect_one(verdict_of(s), 3, "forward");
}

TEST(Issue13, BackwardTwiceForSteps10To19) {
  Spec s = issue13_spec();
  s.faults = {slow(0, "backward", 2.0, 10, 20)};
  expect_one(verdict_of(s), 0, "backward", 10, 19);
}

TEST(Issue13, DataLoadFiveTimesForSteps20To29) {
  Spec s = issue13_spec();
  s.faults = {slow(2, "data_load", 5.0, 20, 30)};
  expect_one(verdict_of(s), 2, "data_load", 20, 29);
}

TEST(Issue13, ThreeSectionsOfOneRankAreEachFound) {
  Spec s = issue13_spec();
  s.faults = {slow(1, "backward", 2), slow(1, "data_load", 3), slow(1, "optimizer", 2)};
  Verdict v = verdict_of(s);
  ASSERT_EQ(v.findings.size(), 3u) << dump(v);
  EXPECT_EQ(v.findings[0].section, "backward");  // 8 ms lost per step, then 2 and 2
  std::set<std::string> sections;
  for (const Finding& f : v.findings) {
    EXPECT_EQ(f.rank, 1);
    sections.insert(f.section);
  }
  EXPECT_EQ(sections, (std::set<std::string>{"backward", "data_load", "optimizer"}));
}

TEST(Issue10Item10, FirstThirdTwiceSlowerInBackwardReachesTheVerdict) {
  Spec s = issue13_spec();
  s.faults = {slow(3, "backward", 2.0, 0, 13)};
  expect_one(verdict_of(s), 3, "backward", 0, 12);
}

TEST(Issue10Item10, WithoutStepsTheWindowScoresReachTheVerdict) {
  // No step section (and no NCCL): no per-step evidence, but the per-window NVRx relative
  // scores of the slow third (0.50) make a transient finding.
  Spec s = issue13_spec();
  s.faults = {slow(3, "backward", 2.0, 0, 13)};
  s.window_s = 0.15;  // two report windows of >= 5 slow steps: a window score needs 5 samples (issue 10 item 8)
  RunModel m = synth::make_run(s);
  for (RankData& r : m.ranks)
    for (CaptureWindow& w : r.windows)
      std::erase_if(w.sections, [](const SectionWindow& sw) { return sw.name == "step"; });
  ScoreReport sc = compute_scores(m, {});
  Analyses a = run_analyses(m, sc, {});
  ASSERT_EQ(a.steps.count(), 0);
  ASSERT_EQ(a.verdict.findings.size(), 1u) << dump(a.verdict);
  const Finding& f = a.verdict.findings[0];
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.section, "backward");
  EXPECT_EQ(f.kind, "transient");
  EXPECT_NEAR(f.evidence.at("nvtx_window_relative_score"), 0.5, 0.05);
  EXPECT_GE(f.evidence.at("windows_below"), 2);
  // A healthy run without steps stays clean.
  RunModel h = synth::make_run(issue13_spec(3));
  for (RankData& r : h.ranks)
    for (CaptureWindow& w : r.windows)
      std::erase_if(w.sections, [](const SectionWindow& sw) { return sw.name == "step"; });
  EXPECT_TRUE(run_analyses(h, compute_scores(h, {}), {}).verdict.findings.empty());
}

TEST(Issue13, TheBiggerLossRanksFirst) {
  // A 2 ms backward on one rank above a 0.5 ms data-loader blip of 10 steps on another.
  Spec s = issue13_spec();
  s.faults = {slow(2, "data_load", 1.5, 5, 15), slow(1, "backward", 1.25)};
  Verdict v = verdict_of(s);
  ASSERT_EQ(v.findings.size(), 2u) << dump(v);
  EXPECT_EQ(v.findings[0].rank, 1);
  EXPECT_EQ(v.findings[0].section, "backward");
  EXPECT_EQ(v.findings[1].rank, 2);
  EXPECT_EQ(v.findings[1].first_step, 5);
  EXPECT_EQ(v.findings[1].last_step, 14);
}

TEST(Issue13, HealthyRunsAreClean) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Verdict v = verdict_of(issue13_spec(seed));
    EXPECT_TRUE(v.findings.empty()) << "seed " << seed << "\n" << dump(v);
  }
}

TEST(Issue13, ImmaterialSlowdownIsNotAFinding) {
  // data_load x 1.2 on one rank: clear statistically (0.2 ms against ~0.02 ms noise) but 1.3 %
  // of the step: below the 2 % default; found at a 1 % setting.
  Spec s = issue13_spec();
  s.faults = {slow(0, "data_load", 1.2)};
  EXPECT_TRUE(verdict_of(s).findings.empty());
  RunModel m = synth::make_run(s);
  AnalysisOptions opt;
  opt.verdict.excess.min_cost_share = 0.01;
  Verdict v = run_analyses(m, compute_scores(m, {}), opt).verdict;
  expect_one(v, 0, "data_load", -1, -1, 0.01);
}

TEST(Excess, SectionSignalsCutByStep) {
  Spec s = issue13_spec();
  RunModel m = synth::make_run(s);
  std::vector<Signal> sig = section_signals(m, detect_steps(m, ""));
  ASSERT_EQ(sig.size(), 5u);  // backward, data_load, forward, optimizer, step
  for (const Signal& x : sig) {
    ASSERT_EQ(x.ns.size(), 40u) << x.name;
    if (x.name == "backward") { EXPECT_NEAR(x.ns[7][2], 8e6, 0.03 * 8e6); }
    EXPECT_EQ(x.parent, x.name == "step" ? "" : "step");
  }
}

// Issue 30 item 1: the README demo's shape (4 ranks, 25 ms step: data_load 10 %, forward 30 %,
// backward 40 %, optimizer 10 %): rank 2's backward 1.5x slower in all 40 steps (+5 ms a step,
// 200 ms in all), and one hiccup of rank 2's step itself, outside every sub-section, in steps 0-6
// (+18 ms a step, 200 ms more in step 0, as at a process's start: 23 ms a step with the backward's
// 5, 161 ms as the median over those steps). The step's transient was kept (its children explain
// too little of it) and every overlapping finding below it on that rank dropped, the whole-run
// backward with it: the verdict named only "step in steps 0-6".
Spec demo_shape_spec(uint64_t seed) {
  Spec s = issue13_spec(seed);  // issue 13's loop with the demo's times and report windows
  s.window_s = 0.25;
  for (auto [k, ms] : {std::pair{0, 2.5}, {1, 7.5}, {2, 10.0}, {3, 2.5}}) s.kernels[k].dur_ns = int64_t(ms * 1e6);
  s.faults = {slow(2, "backward", 1.5), {Fault::Kind::step_stall, 2, 1.0, 18'000'000, "", 0, 7},
              {Fault::Kind::step_stall, 2, 1.0, 200'000'000, "", 0, 1}};
  return s;
}

TEST(Issue30, AParentsHiccupDoesNotHideTheChildsWholeRunSlowdown) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Verdict v = verdict_of(demo_shape_spec(seed));
    ASSERT_FALSE(v.findings.empty()) << "seed " << seed;
    // The injected fault leads: it costs the job the most in all (5 ms x 40 steps).
    const Finding& f = v.findings[0];
    EXPECT_EQ(f.rank, 2) << dump(v);
    EXPECT_EQ(f.section, "backward") << dump(v);
    EXPECT_EQ(f.kind, "persistent") << dump(v);
    EXPECT_NEAR(f.impact_ns, 5e6, 0.5e6) << dump(v);
    // The hiccup is still named, for its own part only: what the backward's excess does not explain.
    bool hiccup = false;
    for (const Finding& g : v.findings) {
      EXPECT_EQ(g.rank, 2) << dump(v);
      if (g.section != "step") continue;
      hiccup = true;
      EXPECT_EQ(g.kind, "transient");
      EXPECT_EQ(g.first_step, 0) << dump(v);
      EXPECT_EQ(g.last_step, 6) << dump(v);
      EXPECT_NEAR(g.impact_ns, 18e6, 1e6) << dump(v);
      EXPECT_NEAR(g.evidence.at("explained_by_backward_ms"), 5.0, 0.5) << dump(v);
    }
    EXPECT_TRUE(hiccup) << dump(v);
  }
}

// A sub-section's finding inside the parent's steps still folds into the parent's (nothing
// changes for a hiccup of the step that carries a child's hiccup of the same steps).
TEST(Issue30, AChildsFindingWithinTheParentsStepsStillFoldsIntoIt) {
  Spec s = demo_shape_spec(5);
  s.faults = {slow(2, "backward", 1.5, 0, 7), {Fault::Kind::step_stall, 2, 1.0, 18'000'000, "", 0, 7}};
  Verdict v = verdict_of(s);
  expect_one(v, 2, "step", 0, 6, 0.02);
  EXPECT_EQ(v.findings[0].evidence.count("explained_by_backward_ms"), 0u);
}

// Issue 30 item 2: a rank whose threads waited for a CPU (the windows' cpu_wait) is named as CPU
// contention, not as a mystery slowdown; the injected fault keeps its own cause.
const Finding* finding_on(const Verdict& v, int rank, const std::string& section) {
  for (const Finding& f : v.findings)
    if (f.rank == rank && f.section == section) return &f;
  return nullptr;
}

// 8 ranks: with 4, two slow ranks in one step move that step's median rank (the noise is measured
// across ranks), and the stalls would hide each other.
Spec contended_spec(bool cpu_wait, Fault::Kind stall) {
  Spec s = demo_shape_spec(11);
  s.ranks = 8;
  s.cpu_wait = cpu_wait;
  s.faults = {slow(2, "backward", 1.5), {stall, 1, 1.0, 4'000'000, "", 10, 21},
              {stall, 3, 1.0, 5'000'000, "", 25, 33}};
  return s;
}

TEST(Issue30, CpuWaitNamesContentionAndLeavesTheInjectedFaultAlone) {
  Verdict v = verdict_of(contended_spec(true, Fault::Kind::cpu_stall));
  const Finding* fault = finding_on(v, 2, "backward");
  ASSERT_NE(fault, nullptr) << dump(v);
  EXPECT_EQ(fault->kind, "persistent");
  EXPECT_EQ(fault->cause, Cause::unknown) << dump(v);  // CPU-only, and rank 2 waited no more than the others
  EXPECT_EQ(v.findings[0].section, "backward") << dump(v);
  for (int rank : {1, 3}) {
    const Finding* f = finding_on(v, rank, "step");
    ASSERT_NE(f, nullptr) << rank << "\n" << dump(v);
    EXPECT_EQ(f->kind, "transient");
    EXPECT_EQ(f->cause, Cause::cpu_contention) << dump(v);
    EXPECT_GE(f->cause_share, 0.5);
    EXPECT_GT(f->evidence.at("cpu_wait_extra_ms"), 0.5 * f->evidence.at("lost_ms_total")) << f->summary;
    EXPECT_NE(f->summary.find("CPU contention"), std::string::npos) << f->summary;
  }
  for (const Finding& f : v.findings) EXPECT_TRUE(f.rank == 2 || f.cause == Cause::cpu_contention) << dump(v);
}

TEST(Issue30, WithoutCpuWaitTheSameStallsAreUnexplained) {
  Verdict v = verdict_of(contended_spec(false, Fault::Kind::cpu_stall));
  for (int rank : {1, 3}) {
    const Finding* f = finding_on(v, rank, "step");
    ASSERT_NE(f, nullptr) << dump(v);
    EXPECT_EQ(f->cause, Cause::unknown) << dump(v);
    EXPECT_EQ(f->evidence.count("cpu_wait_ms"), 0u);
  }
}

// A rank slower in backward over the whole run that also waited for a CPU in its last steps,
// outside backward: the slope of the sections' extra time on the extra wait was taken through the
// origin, so the rank's steady excess paired with its late wait made backward "follow" the wait
// (slope 0.97) and its last steps lost their excess to it: a persistent slowdown came out as a
// transient of steps 0-33 (VerdictEndToEnd.Backward110 under ASan, 2026-11-28).
TEST(Issue30, ALateWaitOutsideASectionDoesNotCutItsWholeRunSlowdownShort) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Spec s = issue13_spec(seed);
    s.ranks = 8;
    s.cpu_wait = true;
    s.faults = {slow(2, "backward", 1.1), {Fault::Kind::cpu_stall, 2, 1.0, 700'000, "", 34, 38}};
    Verdict v = verdict_of(s);
    const Finding* f = finding_on(v, 2, "backward");
    ASSERT_NE(f, nullptr) << "seed " << seed << "\n" << dump(v);
    EXPECT_EQ(f->kind, "persistent") << "seed " << seed << "\n" << dump(v);
    EXPECT_LT(f->evidence.at("cpu_wait_slope"), 0.3) << "seed " << seed << "\n" << dump(v);
  }
}

// Stalls that are not CPU wait (the rank slept, waited on I/O...) stay unexplained with cpu_wait on.
TEST(Issue30, StallsThatAreNotCpuWaitAreNotCalledContention) {
  Verdict v = verdict_of(contended_spec(true, Fault::Kind::step_stall));
  for (int rank : {1, 3}) {
    const Finding* f = finding_on(v, rank, "step");
    ASSERT_NE(f, nullptr) << dump(v);
    EXPECT_EQ(f->cause, Cause::unknown) << dump(v);
    EXPECT_LT(f->evidence.at("cpu_wait_extra_ms"), 0.5 * f->evidence.at("lost_ms_total")) << f->summary;
  }
}

Signal flat(int steps, int ranks, double value) {
  Signal s;
  s.name = "x";
  s.ns.assign(steps, std::vector<double>(ranks, value));
  for (int k = 0; k < steps; ++k)
    for (int r = 0; r < ranks; ++r) s.ns[k][r] += 1000.0 * ((k * 7 + r * 13) % 11 - 5);  // +-5 us spread
  return s;
}

TEST(Excess, CusumFindsTheExactRun) {
  Signal s = flat(40, 8, 1e6);
  for (int k = 12; k < 19; ++k) s.ns[k][5] += 100'000;  // 7 steps, 10 % of a 1 ms step
  ExcessOptions o;
  ExcessCriteria c = excess_criteria(o, 1e6, 8 * 40);
  std::vector<Excess> xs = detect_excess(s, 1e6, c, o);
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].rank, 5u);
  EXPECT_EQ(xs[0].first, 12);
  EXPECT_EQ(xs[0].last, 18);
  EXPECT_FALSE(xs[0].whole_run);
  EXPECT_NEAR(xs[0].median_excess_ns, 100'000, 12'000);
  EXPECT_NEAR(xs[0].cost_share, 0.1, 0.012);
}

TEST(Excess, ShortRunsAndImmaterialShiftsAreNot) {
  Signal s = flat(40, 8, 1e6);
  for (int k = 12; k < 16; ++k) s.ns[k][5] += 500'000;  // 4 steps: below min_steps
  for (int k = 0; k < 40; ++k) s.ns[k][2] += 15'000;     // 1.5 % of the step: immaterial
  ExcessOptions o;
  ExcessCriteria c = excess_criteria(o, 1e6, 8 * 40);
  EXPECT_TRUE(detect_excess(s, 1e6, c, o).empty());
  // Two report windows' worth of time is enough for a shorter run.
  o.window_ns = 1.5e6;
  std::vector<double> starts;
  for (int k = 0; k < 40; ++k) starts.push_back(1.0e6 * k);
  std::vector<Excess> xs = detect_excess(s, 1e6, c, o, starts);
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].first, 12);
  EXPECT_EQ(xs[0].last, 15);
}

// Rows where every rank spent the same (a run of summaries without occurrences: all 0) are
// skipped as a whole; one rank slow in a few steps of such a signal, and a NaN where a rank did
// not run the section, still count: the skip sees them.
TEST(Excess, EqualRowsShowNothingAndOneSlowRankAmongThemIsFound) {
  Signal s;
  s.name = "x";
  s.ns.assign(40, std::vector<double>(8, 0.0));
  s.ns[3][6] = std::numeric_limits<double>::quiet_NaN();
  ExcessOptions o;
  ExcessCriteria c = excess_criteria(o, 1e6, 8 * 40);
  EXPECT_TRUE(detect_excess(s, 1e6, c, o).empty());
  for (int k = 20; k < 30; ++k) s.ns[k][2] = 200'000;  // 20 % of a 1 ms step, 10 steps
  std::vector<Excess> xs = detect_excess(s, 1e6, c, o);
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].rank, 2u);
  EXPECT_EQ(xs[0].first, 20);
  EXPECT_EQ(xs[0].last, 29);
}

TEST(Excess, CriticalZGrowsWithTheTests) {
  ExcessOptions o;
  EXPECT_DOUBLE_EQ(critical_z(o, 1), 4.0);  // floor
  EXPECT_NEAR(critical_z(o, 1e5), 5.20, 0.01);  // one-sided p = 0.01 / 1e5
  EXPECT_GT(critical_z(o, 1e7), critical_z(o, 1e5));
}

// Issue 14: an NCCL finding's impact_ms is what one collective loses to the late rank (its lead
// over the median rank), comparable with the per-step findings; it was the sum of every waiting
// rank's time, which grew with the rank count (29,708 ms at 960 ranks for a 405 ms step).
Finding nccl_finding(int ranks) {
  Spec s;
  s.ranks = ranks;
  s.steps = 24;
  s.window_s = 0.004;
  s.faults = {{Fault::Kind::late_collective, 3, 1.0, 1'500'000}};  // 1.5 ms host stall, ~0.8 ms past the GPU
  RunModel m = synth::make_run(s);
  for (RankData& r : m.ranks)  // no per-kernel records: only the NCCL analysis can judge
    for (CaptureWindow& w : r.windows) {
      w.gpu.clear();
      w.gpu_sampled = false;
    }
  ScoreReport sc = compute_scores(m, {});
  GpuScoreReport gpu = compute_gpu_scores(m, sc);
  CommReport comm = analyze_collectives(m, sc);
  sc.stragglers.insert(sc.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  Verdict v = run_analyses(m, sc, {}, nullptr, std::move(gpu), std::move(comm)).verdict;
  EXPECT_EQ(v.findings.size(), 1u) << dump(v);
  return v.findings.empty() ? Finding{} : v.findings[0];
}

TEST(Verdict, NcclImpactIsThePerCollectiveLossWhateverTheRankCount) {
  const Finding small = nccl_finding(8), large = nccl_finding(512);
  EXPECT_EQ(small.rank, 3);
  EXPECT_EQ(large.rank, 3);
  // ~0.78 ms late (the stall less the time the host ran ahead of its GPU) at both sizes.
  EXPECT_NEAR(small.impact_ns, 780'000, 60'000) << small.summary;
  EXPECT_NEAR(large.impact_ns, small.impact_ns, 0.05 * small.impact_ns) << large.summary;
  EXPECT_NEAR(large.evidence.at("comm_lateness_ms") * 1e6, large.impact_ns, 1);
  // The blame (every waiting rank's time) still grows with the ranks, and stays evidence only.
  EXPECT_GT(large.evidence.at("comm_blame_ms"), 50 * small.evidence.at("comm_blame_ms"));
}

}  // namespace
}  // namespace laggard::report

#include "power_trial.h"

namespace laggard::report {
namespace verdict_test {

using synth::PowerOutcome;
using synth::PowerTrial;

// A fast slice of bench/detection-power: exact rank, section and steps; nothing else found.
TEST(DetectionPower, FastSlice) {
  struct Case {
    bool gpu;
    int ranks;
    double factor;
    std::string section;
    int duration;
  };
  const Case cases[] = {{false, 4, 1.2, "backward", 0},   {false, 4, 1.2, "backward", 20},
                        {false, 4, 1.5, "forward", 5},    {false, 64, 1.1, "backward", 0},
                        {false, 64, 2.0, "data_load", 5}, {true, 8, 1.5, "backward", 0},
                        {true, 8, 2.0, "forward", 5}};
  for (const Case& c : cases)
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      PowerTrial t{c.gpu, c.ranks, 40, 0.02, c.factor, c.section, c.duration, seed};
      PowerOutcome o = synth::run_power_trial(t);
      SCOPED_TRACE(::testing::Message() << (c.gpu ? "gpu " : "cpu ") << c.ranks << " ranks, " << c.section << " x"
                                        << c.factor << ", " << c.duration << " steps, seed " << seed);
      EXPECT_GE(o.cost_share, 0.05);
      EXPECT_TRUE(o.found) << o.first_other;
      EXPECT_TRUE(o.exact_steps);
      EXPECT_EQ(o.other_findings, 0) << o.first_other;
      EXPECT_EQ(o.misplaced, 0);
    }
}

TEST(DetectionPower, HealthyRunsFindNothing) {
  for (uint64_t seed = 1; seed <= 4; ++seed)
    for (bool gpu : {false, true})
      for (double noise : {0.0, 0.05}) {
        PowerTrial t{gpu, 16, 40, noise, 1.0, "", 0, seed};
        PowerOutcome o = synth::run_power_trial(t);
        EXPECT_EQ(o.other_findings, 0) << o.first_other;
      }
}

}  // namespace
}  // namespace laggard::report
