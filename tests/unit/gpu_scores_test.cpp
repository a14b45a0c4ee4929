// NVRx GPU scores against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "gpu_scores.h"
#include "render.h"
#include "render_gpu.h"
#include "scores.h"

namespace laggard::report {
namespace gpu_scores_test {

constexpr int64_t kS = 1'000'000'000;

struct K {
  std::string section;  // "" = no section
  std::string name;
  int64_t median, count, total;
  bool nccl = false;
  GpuKind kind = GpuKind::kernel;
  uint32_t grid = 1;
};

// Adds one capture window [w, w+1) s with these kernel statistics to rank r.
void window(RunModel& m, RankData& r, int w, const std::vector<K>& ks) {
  CaptureWindow cw;
  cw.index = w;
  cw.start_ns = w * kS;
  cw.end_ns = cw.start_ns + kS;
  cw.gpu_sampled = true;
  for (const K& k : ks) {
    KernelWindowStats s;
    s.section = k.section.empty() ? StringTable::kNone : m.strings.intern(k.section);
    s.name = m.strings.intern(k.name);
    s.kind = k.kind;
    s.nccl = k.nccl;
    s.grid[0] = k.grid;
    s.block[0] = 128;
    s.count = k.count;
    s.total_ns = k.total;
    s.median_ns = k.median;
    s.min_ns = s.max_ns = k.median;
    cw.kernel_stats.push_back(s);
  }
  r.windows.push_back(cw);
}

RankData rank(int id) {
  RankData r;
  r.rank = id;
  r.host = "h" + std::to_string(id);
  r.flush_s = 1;
  r.final = true;
  r.cupti_status = "on";
  return r;
}

struct Scored {
  ScoreReport rep;
  GpuScoreReport gpu;
};

Scored score(const RunModel& m) {
  ScoreOptions opt;
  opt.window_s = 1;
  Scored s;
  s.rep = compute_scores(m, opt);
  s.gpu = compute_gpu_scores(m, s.rep);
  return s;
}

const Straggler* find(const ScoreReport& rep, int rank, const std::string& section, const std::string& metric) {
  for (const Straggler& s : rep.stragglers)
    if (s.scope == "gpu" && s.rank == rank && s.section == section && s.metric == metric) return &s;
  return nullptr;
}

// rank 0: A med 100 (total 1000), B med 50 (total 1000), C only here, NCCL med 1000
// rank 1: A med 200 (total 2000), B med 50 (total 1000),              NCCL med 9000
// relative: rank 0 = 1; rank 1 = (0.5 * 2000 + 1 * 1000) / 3000 = 0.6667. C has no reference
// (rank 1 never ran it) and NCCL is excluded, so neither moves the scores.
TEST(GpuScores, RelativeIsTheTimeWeightedMedianRatioOverCommonKernels) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"", "A", 100, 10, 1000}, {"", "B", 50, 20, 1000}, {"", "C", 10, 1, 10},
                    {"", "ncclDevKernel_AllReduce", 1000, 1, 1000, true}});
  window(m, r1, 0, {{"", "A", 200, 10, 2000}, {"", "B", 50, 20, 1000},
                    {"", "ncclDevKernel_AllReduce", 9000, 1, 9000, true}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  ASSERT_TRUE(s.gpu.any);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[0].score.relative, 1.0);
  EXPECT_NEAR(*s.gpu.ranks[1].score.relative, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(s.gpu.ranks[0].kernel_count, 31u);  // NCCL not counted as compute
  EXPECT_EQ(s.gpu.ranks[0].nccl_count, 1u);
  EXPECT_EQ(s.gpu.ranks[1].nccl_ns, 9000);
  const Straggler* st = find(s.rep, 1, "", "relative");
  ASSERT_NE(st, nullptr);
  EXPECT_NEAR(st->score, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(st->windows, std::vector<int>{0});
  EXPECT_EQ(find(s.rep, 0, "", "relative"), nullptr);
}

// rank 0, window 0: A 100 (total 1000), B 50 (1000); window 1: A 150 (1500), B 50 (1000)
// individual: w0 = 1 (its own best); w1 = (100/150 * 1500 + 1 * 1000) / 2500 = 0.8; run = 0.8
TEST(GpuScores, IndividualComparesWithTheRanksBestWindowSoFar) {
  RunModel m;
  RankData r0 = rank(0);
  window(m, r0, 0, {{"", "A", 100, 10, 1000}, {"", "B", 50, 20, 1000}});
  window(m, r0, 1, {{"", "A", 150, 10, 1500}, {"", "B", 50, 20, 1000}});
  m.ranks = {r0};
  Scored s = score(m);
  ASSERT_EQ(s.gpu.windows.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.gpu.windows[0][0].score.individual, 1.0);
  EXPECT_NEAR(*s.gpu.windows[1][0].score.individual, 0.8, 1e-12);
  EXPECT_NEAR(*s.gpu.ranks[0].score.individual, 0.8, 1e-12);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[0].score.relative, 1.0);  // alone: its own reference
  EXPECT_EQ(find(s.rep, 0, "", "individual"), nullptr);  // 0.8 is above the 0.75 threshold
  // With a stricter threshold the same data is a straggler, in window 1 only.
  ScoreOptions strict;
  strict.window_s = 1;
  strict.individual_threshold = 0.9;
  ScoreReport rep = compute_scores(m, strict);
  compute_gpu_scores(m, rep);
  const Straggler* st = find(rep, 0, "", "individual");
  ASSERT_NE(st, nullptr);
  EXPECT_NEAR(st->score, 0.8, 1e-12);
  EXPECT_EQ(st->windows, std::vector<int>{1});
}

// The run's kernels are gathered once for every rank (RunKernels), skipping a statistic whose
// kernel the window before listed at the same place: a kernel first listed where the window
// before had another, of the same name in another launch shape, or in a rank after the first, is
// still one of the run's. rank 0: w0 A, w1 B; rank 1: w0 A, w1 B (twice as long), then A in grid 2
// where rank 0's last window had nothing. Relative, rank 1: (1 * 1000 + 0.5 * 2000) / 3000, A in
// grid 2 having no reference.
TEST(GpuScores, AKernelFirstListedWhereTheWindowBeforeHadAnotherIsOneOfTheRuns) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"", "A", 100, 10, 1000}});
  window(m, r0, 1, {{"", "B", 50, 20, 1000}});
  window(m, r1, 0, {{"", "A", 100, 10, 1000}});
  window(m, r1, 1, {{"", "B", 100, 20, 2000}, {"", "A", 100, 10, 1000, false, GpuKind::kernel, 2}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  ASSERT_TRUE(s.gpu.ranks[1].score.relative.has_value());
  EXPECT_NEAR(*s.gpu.ranks[1].score.relative, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(s.gpu.ranks[1].score.kernels, 40u);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[0].score.relative, 1.0);
}

// A rank's statistics are grouped by kernel, scope and report window without sorting them all
// (issue 29): the scores must not depend on the order the capture windows or their kernels come in,
// nor on a window listing one kernel twice (two sections). The same data in two orders: window 1
// ends up with A 150 over both sections' records (weighted median of 150 and 150), B 50 and twelve
// kernels that take the same time on both ranks.
TEST(GpuScores, ScoresDoNotDependOnTheOrderOfWindowsAndKernels) {
  auto build = [](bool shuffled) {
    RunModel m;
    RankData r0 = rank(0), r1 = rank(1);
    std::vector<K> w0 = {{"", "A", 100, 10, 1000}, {"", "B", 50, 20, 1000}};
    std::vector<K> w1 = {{"fwd", "A", 150, 5, 750}, {"fwd", "B", 50, 20, 1000}, {"bwd", "A", 150, 5, 750}};
    std::vector<K> other = {{"fwd", "A", 100, 10, 1000}, {"fwd", "B", 50, 20, 1000}};
    // Kernels of a section of their own, so that the sections with A hold few of the rank's kernels.
    for (int i = 0; i < 12; ++i)
      for (std::vector<K>* v : {&w0, &w1, &other}) v->push_back({"big", "X" + std::to_string(i), 40, 1, 40});
    if (shuffled) {
      std::reverse(w0.begin(), w0.end());
      std::reverse(w1.begin(), w1.end());
      window(m, r0, 1, w1);  // the later window first in the rank's list
      window(m, r0, 0, w0);
      std::swap(r0.windows[0].index, r0.windows[1].index);
    } else {
      window(m, r0, 0, w0);
      window(m, r0, 1, w1);
    }
    window(m, r1, 0, other);
    window(m, r1, 1, other);
    m.ranks = {r0, r1};
    return m;
  };
  const RunModel ordered = build(false), shuffled = build(true);
  const Scored a = score(ordered), b = score(shuffled);
  ASSERT_EQ(a.gpu.windows.size(), 2u);
  ASSERT_EQ(b.gpu.windows.size(), 2u);
  EXPECT_NEAR(*a.gpu.windows[1][0].score.individual, 2480.0 / 2980.0, 1e-12);  // (100/150 x 1500 + 1000 + 480) / 2980
  EXPECT_NEAR(*a.gpu.windows[1][0].score.relative, 2480.0 / 2980.0, 1e-12);    // rank 1 has the same references
  for (size_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < a.gpu.windows[k].size(); ++i) {
      EXPECT_EQ(a.gpu.windows[k][i].score.individual, b.gpu.windows[k][i].score.individual) << k << " " << i;
      EXPECT_EQ(a.gpu.windows[k][i].score.relative, b.gpu.windows[k][i].score.relative) << k << " " << i;
    }
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(a.gpu.ranks[r].score.individual, b.gpu.ranks[r].score.individual) << r;
    EXPECT_EQ(a.gpu.ranks[r].score.relative, b.gpu.ranks[r].score.relative) << r;
    ASSERT_EQ(a.gpu.ranks[r].sections.size(), b.gpu.ranks[r].sections.size()) << r;
    for (const auto& [name, sc] : a.gpu.ranks[r].sections) {
      EXPECT_EQ(sc.relative, b.gpu.ranks[r].sections.at(name).relative) << r << " " << name;
      EXPECT_EQ(sc.individual, b.gpu.ranks[r].sections.at(name).individual) << r << " " << name;
    }
  }
  // fwd in window 1 (A 150, B 50) against rank 1's fwd (A 100, B 50): (100/150 x 750 + 1000) / 1750.
  ASSERT_TRUE(a.gpu.ranks[0].sections.count("fwd"));
  EXPECT_NEAR(*a.gpu.windows[1][0].sections.at("fwd").relative, 1500.0 / 1750.0, 1e-12);
}

TEST(GpuScores, SectionScoresUseOnlyKernelsLaunchedInThatSection) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"fwd", "A", 100, 10, 1000}, {"bwd", "D", 300, 10, 3000}, {"", "X", 5, 1, 5}});
  window(m, r1, 0, {{"fwd", "A", 100, 10, 1000}, {"bwd", "D", 600, 10, 6000}, {"", "X", 5, 1, 5}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  const RankGpu& g1 = s.gpu.ranks[1];
  EXPECT_DOUBLE_EQ(*g1.sections.at("fwd").relative, 1.0);
  EXPECT_DOUBLE_EQ(*g1.sections.at("bwd").relative, 0.5);
  EXPECT_DOUBLE_EQ(*g1.sections.at(kNoSection).relative, 1.0);
  // rank level: A 1.0 (1000), D 0.5 (6000), X 1.0 (5) -> (1000 + 3000 + 5) / 7005
  EXPECT_NEAR(*g1.score.relative, 4005.0 / 7005.0, 1e-12);
  EXPECT_NE(find(s.rep, 1, "bwd", "relative"), nullptr);
  EXPECT_EQ(find(s.rep, 1, "fwd", "relative"), nullptr);
  EXPECT_NE(find(s.rep, 1, "", "relative"), nullptr);
  EXPECT_EQ(s.gpu.top_kernels.at("bwd").at(0).name, "D");
  EXPECT_EQ(s.gpu.top_kernels.at("bwd").at(0).count, 20u);
  EXPECT_EQ(s.gpu.top_kernels.at("bwd").at(0).ranks, 2);
}

TEST(GpuScores, LaunchShapeIsPartOfTheKernelIdentity) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  // Same name, different grids: two kernels. Rank 1 only runs grid 2, so grid 1 has no
  // reference and rank 0's score rests on grid 2 alone.
  window(m, r0, 0, {{"", "A", 100, 1, 100, false, GpuKind::kernel, 1}, {"", "A", 400, 1, 400, false, GpuKind::kernel, 2}});
  window(m, r1, 0, {{"", "A", 200, 1, 200, false, GpuKind::kernel, 2}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[0].score.relative, 0.5);  // 200 / 400
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[1].score.relative, 1.0);
}

TEST(GpuScores, RanksWithoutGpuDataHaveNoScoreAndDoNotBlockOthers) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1), r2 = rank(2);
  r2.cupti_status = "off: libcupti not found";
  window(m, r0, 0, {{"", "A", 100, 1, 100}});
  window(m, r1, 0, {{"", "A", 300, 1, 300}});
  window(m, r2, 0, {});
  r2.windows[0].gpu_sampled = false;
  m.ranks = {r0, r1, r2};
  Scored s = score(m);
  EXPECT_NEAR(*s.gpu.ranks[1].score.relative, 1.0 / 3.0, 1e-12);
  EXPECT_FALSE(s.gpu.ranks[2].has_data);
  EXPECT_FALSE(s.gpu.ranks[2].score.relative.has_value());
}

// NVRx parity, deliberate difference (docs/report.md "Differences from NVRx"): NVRx divides the reference
// median by the rank's median; a kernel whose median is 0 ns (below the timer's resolution) would
// divide by zero there. laggard scores that kernel 1.0 (it cannot be slower than the reference).
// rank 1: A med 0 (total 0), B med 100 vs 50 (total 1000) -> (1 * 0 + 0.5 * 1000) / 1000 = 0.5.
TEST(GpuScores, ZeroMedianScoresOneInsteadOfDividingByZero) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"", "A", 0, 10, 0}, {"", "B", 50, 10, 500}});
  window(m, r1, 0, {{"", "A", 0, 10, 0}, {"", "B", 100, 10, 1000}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  ASSERT_TRUE(s.gpu.ranks[1].score.relative.has_value());
  EXPECT_FALSE(std::isnan(*s.gpu.ranks[1].score.relative));
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[1].score.relative, 0.5);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[0].score.relative, 1.0);
}

// NVRx parity: NVRx has no sections, every kernel is in its score. laggard's rank-level GPU score
// ("[GPU] all kernels") keeps that: kernels launched outside any NVTX section count in it.
// rank 1: only (no section) kernel A is slower (200 vs 100) -> rank score 0.5.
TEST(GpuScores, KernelsOutsideAnySectionCountInTheRankScore) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"", "A", 100, 1, 100}, {"fwd", "B", 50, 1, 50}});
  window(m, r1, 0, {{"", "A", 200, 1, 200}, {"fwd", "B", 50, 1, 50}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  EXPECT_NEAR(*s.gpu.ranks[1].score.relative, (0.5 * 200 + 1.0 * 50) / 250, 1e-12);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[1].sections.at("fwd").relative, 1.0);
}

TEST(GpuScores, MemcpyAndMemsetAreReportedButNotScored) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"", "A", 100, 1, 100}, {"", "[memcpy HtoD]", 10, 1, 10, false, GpuKind::memcpy}});
  window(m, r1, 0, {{"", "A", 100, 1, 100}, {"", "[memcpy HtoD]", 1000, 1, 1000, false, GpuKind::memcpy}});
  m.ranks = {r0, r1};
  Scored s = score(m);
  EXPECT_DOUBLE_EQ(*s.gpu.ranks[1].score.relative, 1.0);
  EXPECT_EQ(s.gpu.ranks[1].memcpy_ns, 1000);
  EXPECT_EQ(s.gpu.ranks[1].kernel_count, 1u);
}

TEST(GpuScores, CompletenessCountsCuptiDrops) {
  RunModel m;
  RankData r0 = rank(0);
  window(m, r0, 0, {{"", "A", 100, 90, 9000}});
  r0.dropped = {{"cupti_records_dropped", 8}, {"gpu_no_timestamp", 2}, {"unmatched_correlation", 4}};
  m.ranks = {r0};
  Scored s = score(m);
  EXPECT_DOUBLE_EQ(s.gpu.ranks[0].completeness, 0.9);
  EXPECT_EQ(s.gpu.ranks[0].lost, 10u);
  EXPECT_EQ(s.gpu.ranks[0].unmatched, 4u);
}

TEST(GpuScores, NoGpuDataAnywhereMeansNoGpuStragglers) {
  RunModel m;
  m.ranks = {rank(0), rank(1)};
  Scored s = score(m);
  EXPECT_FALSE(s.gpu.any);
  EXPECT_TRUE(s.rep.stragglers.empty());
  std::ostringstream text;
  render_gpu_text(m, s.gpu, text);
  EXPECT_NE(text.str().find("no kernels captured"), std::string::npos);
}

TEST(GpuScores, RenderedTextAndJson) {
  RunModel m;
  RankData r0 = rank(0), r1 = rank(1);
  window(m, r0, 0, {{"bwd", "_Z4gemmPfS_i", 100, 10, 1000}});
  window(m, r1, 0, {{"bwd", "_Z4gemmPfS_i", 300, 10, 3000}});
  m.ranks = {r0, r1};
  m.world_size = 2;
  Scored s = score(m);
  std::ostringstream text;
  render_text(m, s.rep, text);
  render_gpu_text(m, s.gpu, text);
  EXPECT_NE(text.str().find("[GPU] bwd"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("[GPU] all kernels"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("gemm(float*, float*, int)"), std::string::npos) << text.str();
  nlohmann::json j = render_json(m, s.rep);
  j["gpu"] = render_gpu_json(m, s.gpu);
  EXPECT_NEAR(j["gpu"]["ranks"][1]["relative_score"].get<double>(), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(j["gpu"]["ranks"][1]["sections"]["bwd"]["relative_score"].get<double>(), 1.0 / 3.0, 1e-12);
  EXPECT_EQ(j["gpu"]["top_kernels"]["bwd"][0]["demangled"], "gemm(float*, float*, int)");
  bool gpu_scope = false;
  for (const auto& st : j["stragglers"]) gpu_scope |= st["scope"] == "gpu" && st["section"] == "bwd";
  EXPECT_TRUE(gpu_scope) << j["stragglers"].dump();
}

TEST(GpuScores, Demangle) {
  EXPECT_EQ(demangle("_Z4gemmPf"), "gemm(float*)");
  EXPECT_EQ(demangle("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
  EXPECT_EQ(demangle("_Znot valid"), "_Znot valid");
}

}  // namespace
}  // namespace laggard::report
