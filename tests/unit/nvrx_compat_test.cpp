// `laggard report --nvrx-compatible` (issue 30 item 6): NVRx's own unit-test cases, their inputs
// and expected outputs transcribed from NVIDIA/nvidia-resiliency-ext d8686d9c,
// tests/straggler/unit/ (file and lines at each test; no NVRx code is copied), run through
// laggard's NVRx ReportGenerator; then the run model cut into NVRx's reports.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "analyses.h"
#include "nvrx_compat.h"
#include "scores.h"
#include "synthetic_run.h"

namespace laggard::report {
namespace nvrx_compat_test {

// The tests' _get_summary (test_relative_gpu_scores.py l. 34-43, test_individual_gpu_scores.py
// l. 34-43): np.median (the mean of the two middle values), np.mean, len.
NvrxStat summary(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  NvrxStat s;
  const size_t n = t.size();
  s.med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  for (double x : t) s.avg += x;
  s.avg /= double(n);
  s.num = double(n);
  return s;
}

std::vector<double> times(double k, std::vector<double> t) {
  for (double& x : t) x *= k;
  return t;
}

NvrxRankInput rank_in(int rank, NvrxSummaries kernels, NvrxSummaries sections = {}) {
  return {rank, "testnode" + std::to_string(rank), std::move(sections), std::move(kernels)};
}

// test_relative_gpu_scores.py l. 46-62, test_relative_gpu_scores_one_rank: one rank is its own
// reference, 1.0 whatever its times.
TEST(NvrxUnitTests, RelativeGpuScoresOneRank) {
  NvrxReportGenerator gen;
  NvrxReport r = gen.generate({rank_in(0, {{"kernel0", summary({1.0, 1.0, 2.0})}})});
  EXPECT_NEAR(r.gpu_relative.at(0), 1.0, 1e-6);
  r = gen.generate({rank_in(0, {{"kernel0", summary(times(1.25, {1.0, 1.0, 2.0}))}})});
  EXPECT_NEAR(r.gpu_relative.at(0), 1.0, 1e-6);
}

// test_relative_gpu_scores.py l. 65-139 (_rank_main_gpu_relative_test, test_relative_gpu_scores_gather_on_rank0):
// 4 ranks, times x (rank + 1); the NCCL kernel (times x (world_size - rank)) is ignored.
TEST(NvrxUnitTests, RelativeGpuScoresGatherOnRank0) {
  std::vector<NvrxRankInput> in;
  for (int r = 0; r < 4; ++r)
    in.push_back(rank_in(r, {{"kernel0", summary(times(r + 1, {1.0, 1.0, 2.0}))},
                             {"kernel1", summary(times(r + 1, {2.0, 2.0, 3.0}))},
                             {"ncclDevKernel_AllReduce_Sum", summary(times(4 - r, {10.0, 20.0, 30.0}))}}));
  NvrxReport rep = NvrxReportGenerator().generate(in);
  ASSERT_EQ(rep.gpu_relative.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(rep.gpu_relative.at(r), 1.0 / (r + 1), 1e-6) << r;
    EXPECT_EQ(rep.rank_to_node.at(r), "testnode" + std::to_string(r));
  }
}

// test_relative_gpu_scores.py l. 189-242 (test_relative_gpu_scores_some_common_kernels): a kernel
// only one rank ran has no reference and is skipped; the common one scores.
TEST(NvrxUnitTests, RelativeGpuScoresSomeCommonKernels) {
  std::vector<NvrxRankInput> in;
  for (int r = 0; r < 4; ++r)
    in.push_back(rank_in(r, {{"kernel_common", summary(times(r + 1, {1.0, 1.0, 2.0}))},
                             {"kernel_only_on_rank" + std::to_string(r), summary(times(r + 1, {2.0, 2.0, 3.0}))}}));
  NvrxReport rep = NvrxReportGenerator().generate(in);
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(rep.gpu_relative.at(r), 1.0 / (r + 1), 1e-6) << r;
}

// test_relative_gpu_scores.py l. 245-356: ranks 1 and 2 with only a kernel of their own, or
// ranks 1 and 3 without kernels: no kernel is common, every rank's score is NaN.
std::vector<NvrxRankInput> no_common(std::set<int> unique, std::set<int> none) {
  std::vector<NvrxRankInput> in;
  for (int r = 0; r < 4; ++r) {
    if (unique.count(r)) in.push_back(rank_in(r, {{"rank_specific_kernel" + std::to_string(r), summary({99.0, 99.0, 99.0})}}));
    else if (none.count(r)) in.push_back(rank_in(r, {}));
    else
      in.push_back(rank_in(r, {{"kernel_common0", summary(times(r + 1, {1.0, 1.0, 2.0}))},
                               {"kernel_common1", summary(times(r + 1, {2.0, 2.0, 3.0}))}}));
  }
  return in;
}

TEST(NvrxUnitTests, RelativeGpuScoresRanksWithUniqueKernels) {
  NvrxReport rep = NvrxReportGenerator().generate(no_common({1, 2}, {}));
  ASSERT_EQ(rep.gpu_relative.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(std::isnan(rep.gpu_relative.at(r))) << r;
}

TEST(NvrxUnitTests, RelativeGpuScoresRanksWithoutKernels) {
  NvrxReport rep = NvrxReportGenerator().generate(no_common({}, {1, 3}));
  ASSERT_EQ(rep.gpu_relative.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(std::isnan(rep.gpu_relative.at(r))) << r;
  EXPECT_TRUE(nvrx_identify_stragglers(rep).gpus_relative.empty());  // NaN is never below a threshold
}

// test_individual_gpu_scores.py l. 46-121 (test_individual_gpu_scores_one_rank): against the rank's
// own best medians so far, the current report included.
TEST(NvrxUnitTests, IndividualGpuScoresOneRank) {
  NvrxReportGenerator gen;
  auto report = [&](std::vector<std::pair<std::string, std::vector<double>>> ks) {
    NvrxSummaries s;
    for (auto& [k, t] : ks) s[k] = summary(t);
    return gen.generate({rank_in(0, s)}).gpu_individual.at(0);
  };
  const std::vector<double> k0 = {1.0, 1.0, 2.0}, k1 = {2.0, 2.0, 3.0};
  EXPECT_NEAR(report({{"kernel0", k0}, {"kernel1", k1}}), 1.0, 1e-6);
  EXPECT_NEAR(report({{"kernel0", times(1.25, k0)}, {"kernel1", times(1.25, k1)}}), 1 / 1.25, 1e-6);
  EXPECT_NEAR(report({{"kernel0", times(2.0, k0)}, {"kernel1", times(2.0, k1)}}), 0.5, 1e-6);
  EXPECT_NEAR(report({{"kernel0", times(3.0, k0)}, {"kernel1", times(3.0, k1)}}), 0.333, 0.001);
  EXPECT_NEAR(report({{"kernel0", times(4.0, k0)}}), 0.25, 1e-6);  // missing kernel1
  EXPECT_NEAR(report({{"kernel1", times(5.0, k1)}}), 0.2, 1e-6);   // missing kernel0
  EXPECT_TRUE(std::isnan(report({})));                            // no kernels
  EXPECT_NEAR(report({{"new_kernel", k0}, {"another_new_kernel", k1}}), 1.0, 1e-6);
  EXPECT_NEAR(report({{"kernel0", times(0.5, k0)}, {"kernel1", times(0.5, k1)}}), 1.0, 1e-6);  // a new best
  EXPECT_NEAR(report({{"kernel0", k0}, {"kernel1", k1}}), 0.5, 1e-6);
}

// test_individual_gpu_scores.py l. 124-193 (_rank_main_gpu_indiv_test, ..._gather_on_rank0): a first
// report at the base times, then times x (rank + 1).
TEST(NvrxUnitTests, IndividualGpuScoresGatherOnRank0) {
  NvrxReportGenerator gen;
  std::vector<NvrxRankInput> first, second;
  for (int r = 0; r < 4; ++r) {
    first.push_back(rank_in(r, {{"kernel0", summary({1.0, 1.0, 2.0})}, {"kernel1", summary({2.0, 2.0, 3.0})}}));
    second.push_back(rank_in(r, {{"kernel0", summary(times(r + 1, {1.0, 1.0, 2.0}))},
                                 {"kernel1", summary(times(r + 1, {2.0, 2.0, 3.0}))}}));
  }
  gen.generate(first);
  NvrxReport rep = gen.generate(second);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(rep.gpu_individual.at(r), 1.0 / (r + 1), 1e-6) << r;
    EXPECT_EQ(rep.rank_to_node.at(r), "testnode" + std::to_string(r));
  }
}

// test_sections.py l. 39-204: 4 ranks run section00..02 for 100 iterations (sleeps of mean 10 ms,
// sd 3 ms; 15 ms for a straggler, or for an individual straggler after iteration 50), a report at
// iteration 50 and one at the end; the last report's straggler lists hold every injected one, and
// are empty when none is injected; no GPU straggler. The sleeps are drawn here from a seeded normal
// distribution instead of Python's random.gauss and time.sleep.
struct SectionScenario {
  std::set<std::pair<std::string, int>> stragglers, indiv_stragglers;
};

NvrxStragglers run_sections(const SectionScenario& sc) {
  constexpr int kRanks = 4, kIters = 100, kHalf = kIters / 2;
  const std::vector<std::string> names = {"section00", "section01", "section02"};
  std::vector<std::mt19937> rng;
  for (int r = 0; r < kRanks; ++r) rng.emplace_back(1000 + r);
  NvrxReportGenerator gen;
  NvrxReport last;
  std::vector<std::map<std::string, std::vector<double>>> elapsed(kRanks);
  auto report = [&] {
    std::vector<NvrxRankInput> in;
    for (int r = 0; r < kRanks; ++r) {
      NvrxRankInput x{r, "dummy_node_name", {}, {}};
      for (auto& [name, ms] : elapsed[r]) x.sections[name] = nvrx_section_stat(ms);
      elapsed[r].clear();  // Detector._reset_sections_elapseds
      in.push_back(std::move(x));
    }
    last = gen.generate(in);
  };
  for (int i = 0; i < kIters; ++i) {
    for (int r = 0; r < kRanks; ++r)
      for (const std::string& s : names) {
        const bool slow = sc.stragglers.count({s, r}) || (sc.indiv_stragglers.count({s, r}) && i > kHalf);
        std::normal_distribution<double> gauss(slow ? 0.015 : 0.010, 0.003);
        elapsed[r][s].push_back(std::max(0.0, gauss(rng[r])) * 1e3);
      }
    if (i == kHalf) report();
  }
  report();
  return nvrx_identify_stragglers(last);
}

TEST(NvrxUnitTests, StragglerSectionsDetected) {
  const std::vector<SectionScenario> scenarios = {  // test_sections.py l. 90-151
      {{{"section00", 0}}, {}},
      {{{"section00", 0}, {"section00", 1}}, {}},
      {{{"section00", 0}, {"section01", 1}}, {}},
      {{}, {}},
      {{}, {{"section00", 0}}},
      {{}, {{"section00", 0}, {"section00", 1}}},
      {{}, {{"section00", 0}, {"section01", 1}}},
  };
  for (size_t k = 0; k < scenarios.size(); ++k) {
    const SectionScenario& sc = scenarios[k];
    NvrxStragglers found = run_sections(sc);
    EXPECT_TRUE(found.gpus_relative.empty()) << k;
    EXPECT_TRUE(found.gpus_individual.empty()) << k;
    const bool indiv = !sc.indiv_stragglers.empty() || k == 3;  // scenario 3 checks the relative lists
    const auto& want = indiv && k != 3 ? sc.indiv_stragglers : sc.stragglers;
    const auto& got = indiv && k != 3 ? found.sections_individual : found.sections_relative;
    if (want.empty()) {
      EXPECT_TRUE(got.empty()) << k;
      continue;
    }
    for (const auto& [section, rank] : want) {
      ASSERT_TRUE(got.count(section)) << k << " " << section;
      EXPECT_TRUE(got.at(section).count({rank, "dummy_node_name"})) << k << " " << section << " rank " << rank;
    }
  }
  // test_sections.py's 8th scenario (l. 145-150): no individual straggler injected, none found.
  EXPECT_TRUE(run_sections({}).sections_individual.empty());
}

// test_det_section_api.py l. 122-133 (test_can_handle_empty_elapseds): a section with no sample in
// a later report is still known: its scores are NaN, not missing, and nothing breaks.
TEST(NvrxUnitTests, CanHandleEmptyElapseds) {
  NvrxReportGenerator gen;
  NvrxReport first = gen.generate({{0, "n", {{"one", nvrx_section_stat({0.001})}}, {}}});
  EXPECT_NEAR(first.section_relative.at("one").at(0), 1.0, 1e-6);
  NvrxReport second = gen.generate({{0, "n", {}, {}}});
  ASSERT_TRUE(second.section_relative.count("one"));
  EXPECT_TRUE(std::isnan(second.section_relative.at("one").at(0)));
  EXPECT_TRUE(std::isnan(second.gpu_relative.at(0)));
  EXPECT_TRUE(nvrx_identify_stragglers(second).sections_relative.empty());
}

// test_interval_tracker.py l. 21-46 (test_estimate): 10 ms iterations, the first 8 of them 40 ms
// longer, report_time_interval 0.5 s: about 50 iterations (the test allows +-5; NVRx's float32
// arithmetic gives exactly 50).
TEST(NvrxUnitTests, IntervalEstimate) {
  std::vector<double> t;
  for (int i = 0; i < 16; ++i) t.push_back(i < 8 ? 0.05 : 0.01);
  EXPECT_EQ(nvrx_iter_interval({t}, 0.5), 50);
  EXPECT_EQ(nvrx_iter_interval({t, std::vector<double>(16, 0.02)}, 0.5), 50);  // the largest over ranks
  EXPECT_EQ(nvrx_iter_interval({std::vector<double>(15, 0.01)}, 0.5), 0);      // not estimated yet
  EXPECT_EQ(nvrx_iter_interval({std::vector<double>(16, 1.0)}, 0.5, 3), 3);    // at least profiling_interval
}

// Values PyTorch 1.13 (Debian python3-torch) gives for `time_interval / torch.median(step_times)`
// on float32 tensors, which it computes as reciprocal(median) * time_interval: 200.0 for a 0.3 s step
// where a float32 division gives 199.99998.
TEST(NvrxUnitTests, IntervalFollowsTorchFloat32) {
  EXPECT_EQ(nvrx_iter_interval({std::vector<double>(16, 0.3)}, 60), 200);
  EXPECT_EQ(nvrx_iter_interval({std::vector<double>(16, 0.0123)}, 60), 4878);
  EXPECT_EQ(nvrx_iter_interval({std::vector<double>(16, 0.0251)}, 60), 2390);
}

// cupti_src/CuptiProfiler.cpp computeStats (l. 44-74) and the key (l. 186-189).
TEST(NvrxUnitTests, KernelStatisticsAndKey) {
  NvrxStat s = nvrx_kernel_stat({4.0f, 1.0f, 3.0f, 2.0f});
  EXPECT_FLOAT_EQ(s.med, 2.5f);  // even count: the mean of the two middle values
  EXPECT_FLOAT_EQ(s.avg, 2.5f);
  EXPECT_EQ(s.num, 4);
  EXPECT_FLOAT_EQ(nvrx_kernel_us(1'234'567), 1234.567f);
  const uint32_t block[3] = {256, 1, 1}, grid[3] = {1024, 2, 1};
  EXPECT_EQ(nvrx_kernel_key("_Z4gemmPf", block, grid), "_Z4gemmPf_blk_256_1_1_grid_1024_2_1");
  NvrxStat c = nvrx_section_stat({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(c.med, 2.0);  // torch.median: the lower middle value
}

// ---- over a run ----

using synth::Fault;
using synth::Spec;

// The GPU synthetic job, rank 5's backward kernels 2x slower.
TEST(NvrxRun, ReportsEveryNIterationsNameTheSlowRank) {
  Spec s;
  s.ranks = 8;
  s.steps = 24;
  s.faults = {{Fault::Kind::slow_gpu, 5, 2.0, 0, "backward"}};
  RunModel m = synth::make_run(s);
  ScoreReport sc = compute_scores(m, {});
  AnalysisOptions opt;
  opt.nvrx_compatible = true;
  opt.nvrx.every = 10;
  Analyses a = run_analyses(m, sc, opt);
  ASSERT_TRUE(a.nvrx && a.nvrx->available) << (a.nvrx ? a.nvrx->why_not : "");
  const NvrxRunReport& n = *a.nvrx;
  ASSERT_EQ(n.reports.size(), 3u);  // after iterations 0, 10 and 20
  EXPECT_EQ(n.reports[0].first_step, 0);
  EXPECT_EQ(n.reports[0].last_step, 0);  // `training_iter % 10 == 0` reports after iteration 0 already
  EXPECT_EQ(n.reports[1].first_step, 1);
  EXPECT_EQ(n.reports[1].last_step, 10);
  EXPECT_EQ(n.unreported_steps, 3);
  for (const NvrxInterval& r : n.reports) {
    EXPECT_TRUE(r.exact);
    EXPECT_EQ(r.stragglers.gpus_relative, (std::set<NvrxStragglerId>{{5, "node1"}})) << r.index;
    // Section scores are CPU time, and the host only launches: NVRx sees no slow section.
    EXPECT_TRUE(r.stragglers.sections_relative.empty()) << r.index;
    // A one-iteration report scores too: NVRx has no minimum of samples (laggard's own scores ask for 5).
    EXPECT_FALSE(std::isnan(r.report.section_relative.at("backward").at(0)));
  }
  // Rank 5's GPU score is its kernels' reference/median ratios weighted by their time: the backward
  // kernels (2x) hold 440 of the 785 us of compute; memcpy, memset and the NCCL kernel do not count.
  const double bwd = 440.0 * 2, other = 345.0;
  EXPECT_NEAR(n.reports[1].report.gpu_relative.at(5), (bwd / 2 + other) / (bwd + other), 0.02);
}

// NVRx's time-based schedule: the interval from the first 16 step times, the first report once
// it is known (call 17 or later).
TEST(NvrxRun, TimeBasedReportsFollowTheIntervalTracker) {
  Spec s;
  s.ranks = 4;
  s.steps = 60;
  RunModel m = synth::make_run(s);
  StepSet steps = detect_steps(m, "");
  const double step_s = double(steps.per_rank[0][1].start_ns - steps.per_rank[0][0].start_ns) * 1e-9;
  NvrxOptions o;
  o.interval_s = 20 * step_s;  // about 20 iterations
  NvrxRunReport n = analyze_nvrx(m, steps, 0, o);
  ASSERT_TRUE(n.available) << n.why_not;
  ASSERT_GE(n.iter_interval, 18);
  ASSERT_LE(n.iter_interval, 22);
  ASSERT_FALSE(n.reports.empty());
  EXPECT_EQ(n.reports[0].first_step, 0);
  EXPECT_EQ(n.reports[0].last_step, n.iter_interval - 1);
  for (const NvrxInterval& r : n.reports) {
    EXPECT_TRUE(r.stragglers.gpus_relative.empty()) << r.index;
    EXPECT_TRUE(r.stragglers.sections_relative.empty()) << r.index;
  }
  o.interval_s = 1000;  // longer than the run: NVRx reports nothing
  EXPECT_FALSE(analyze_nvrx(m, steps, 0, o).reports.size() > 0);
}

// A rank without any kernel in a report makes every rank's GPU relative score NaN in NVRx
// (test_relative_gpu_scores.py l. 320-356); laggard's own GPU scores still score the others.
TEST(NvrxRun, ARankWithoutKernelsMakesEveryGpuRelativeScoreNaN) {
  Spec s;
  s.ranks = 4;
  s.steps = 12;
  RunModel m = synth::make_run(s);
  for (CaptureWindow& w : m.ranks[3].windows) {
    std::erase_if(w.gpu, [](const GpuActivity& a) { return !a.nccl; });
    std::erase_if(w.kernel_stats, [](const KernelWindowStats& k) { return !k.nccl; });
  }
  NvrxOptions o;
  o.every = 5;
  NvrxRunReport n = analyze_nvrx(m, detect_steps(m, ""), 0, o);
  ASSERT_FALSE(n.reports.empty());
  for (const auto& [rank, v] : n.reports.back().report.gpu_relative) EXPECT_TRUE(std::isnan(v)) << rank;
  for (const auto& [rank, v] : n.reports.back().report.gpu_individual) {
    if (rank != 3) {
      EXPECT_FALSE(std::isnan(v)) << rank;  // individual scores need no other rank
    }
  }
}

}  // namespace nvrx_compat_test
}  // namespace laggard::report
