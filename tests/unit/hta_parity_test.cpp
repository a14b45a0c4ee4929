// Parity with Holistic Trace Analysis on HTA's own traces (../shared/traces/kineto-hta, every CUDA
// trace set): `laggard import kineto` then analyze_hta() must give HTA's numbers, one test per set.
// Expected values were computed by running HTA (HolisticTraceAnalysis f4d0062, TraceAnalysis with
// its defaults: get_temporal_breakdown, get_idle_time_breakdown per rank (consecutive_kernel_delay 30),
// get_gpu_kernel_breakdown(include_memory_kernels=True), get_comm_comp_overlap,
// get_cuda_kernel_launch_stats(runtime_cutoff 50, launch_delay_cutoff 100)) on each directory by
// hand; HTA is not part of laggard. A set whose file has no rank is imported as rank 0, as HTA does.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "breakdown.h"
#include "gpu_timeline.h"
#include "hta_compat.h"
#include "import_kineto.h"
#include "reader.h"
#include "temp_dir.h"

using namespace laggard::report;
namespace fs = std::filesystem;

namespace hta_parity_test {

struct TemporalRef { int rank; int64_t idle, compute, non_compute, kernel_time; };
struct IdleRef { int rank; uint32_t stream; int64_t host_wait, kernel_wait, other; };
struct OverlapRef { int rank; double pctg; };  // -1: HTA gives NaN (no communication)
struct LaunchRef { int rank; uint64_t count, short_kernels, runtime_outliers, delay_outliers; int64_t delay_sum; };
struct SetRef {
  const char* dir;
  std::vector<TemporalRef> temporal;
  std::vector<IdleRef> idle;
  std::map<std::string, int64_t> kernel_types;
  std::vector<OverlapRef> overlap;
  std::vector<LaunchRef> launch;
};

const std::vector<SetRef>& references() {
  static const std::vector<SetRef> sets = {
    {"trace_filter",
     {{0, 321378, 106252, 172428, 600058}, {1, 328671, 135548, 136455, 600674}},
     {{0, 23u, 596037, 70, 34}, {0, 84u, 148934, 6, 0}, {0, 25u, 0, 9, 47865}, {0, 7u, 213825, 1985, 261740}, {0, 203u, 0, 0, 0}, {1, 23u, 596313, 100, 0}, {1, 25u, 0, 9, 53028}, {1, 7u, 156827, 1816, 281064}, {1, 84u, 251860, 0, 23247}, {1, 203u, 0, 0, 0}},
     {{"COMMUNICATION", 305584}, {"COMPUTATION", 185023}, {"COMPUTATION overlapping COMMUNICATION", 56747}, {"MEMORY", 2288}, {"COMMUNICATION overlapping MEMORY", 1011}, {"COMPUTATION overlapping MEMORY", 18}, {"COMPUTATION overlapping COMMUNICATION overlapping MEMORY", 12}},
     {{0, 11.81}, {1, 20.05}},
     {{0, 602, 140, 0, 469, 9880122}, {1, 577, 140, 0, 442, 9761662}}},
    {"nccl_parser_config",
     {{0, 338781, 75169, 21636, 435586}},
     {{0, 7u, 357247, 2155, 0}, {0, 40u, 381499, 0, 0}},
     {{"COMPUTATION", 71696}, {"COMMUNICATION", 20621}, {"COMPUTATION overlapping COMMUNICATION", 3473}, {"MEMORY", 831}, {"COMMUNICATION overlapping MEMORY", 184}},
     {{0, 14.31}},
     {{0, 2516, 1347, 0, 180, 70623}}},
    {"ns_resolution_trace",
     {{0, 10113, 372150, 2371, 384634}},
     {{0, 7u, 1709, 8404, 0}},
     {{"COMPUTATION", 372150}, {"MEMORY", 2371}},
     {{0, -1}},
     {{0, 4876, 2752, 663, 4713, 322052817}}},
    {"negative_queue_length_values_check",
     {{0, 705853, 143836, 166865, 1016554}},
     {{0, 7u, 0, 17159, 691231}, {0, 25u, 628598, 85, 0}, {0, 27u, 792592, 1000, 7135}, {0, 285u, 0, 0, 675305}, {0, 363u, 0, 75, 673182}, {0, 84u, 62901, 12, 665192}},
     {{"COMPUTATION", 138794}, {"COMMUNICATION", 134025}, {"MEMORY", 32246}, {"COMPUTATION overlapping MEMORY", 3171}, {"COMPUTATION overlapping COMMUNICATION", 1871}, {"COMMUNICATION overlapping MEMORY", 594}},
     {{0, 1.37}},
     {{0, 5224, 1753, 110, 5083, 635597575}}},
    {"trace_diff/test",
     {{1, 46910, 429216, 152245, 628371}},
     {{1, 16u, 422925, 829, 0}, {1, 7u, 2960, 42372, 41756}, {1, 15u, 348483, 138, 38936}, {1, 14u, 520794, 1087, 14536}},
     {{"COMPUTATION", 267839}, {"COMPUTATION overlapping COMMUNICATION", 129148}, {"MEMORY", 92887}, {"COMMUNICATION", 53846}, {"COMPUTATION overlapping MEMORY", 30501}, {"COMMUNICATION overlapping MEMORY", 5512}, {"COMPUTATION overlapping COMMUNICATION overlapping MEMORY", 1728}},
     {{1, 68.8}},
     {{1, 8310, 4615, 65, 8142, 316928263}}},
    {"trace_diff/control",
     {{3, 62119, 234760, 86525, 383404}},
     {{3, 21u, 237710, 71, 0}, {3, 20u, 346996, 621, 7470}, {3, 7u, 102154, 14226, 32183}, {3, 22u, 271786, 1253, 0}},
     {{"COMPUTATION", 151685}, {"COMMUNICATION", 69110}, {"COMPUTATION overlapping COMMUNICATION", 55152}, {"COMPUTATION overlapping MEMORY", 20762}, {"MEMORY", 16328}, {"COMPUTATION overlapping COMMUNICATION overlapping MEMORY", 7161}, {"COMMUNICATION overlapping MEMORY", 1087}},
     {{3, 47.03}},
     {{3, 7875, 3067, 25, 5111, 15865017}}},
    {"df_index_resolver",
     {{1, 643612, 496485, 256572, 1396669}},
     {{1, 7u, 791330, 16727, 73829}, {1, 14u, 933139, 5568, 4444}},
     {{"COMPUTATION", 496485}, {"COMMUNICATION", 238274}, {"MEMORY", 18298}, {"COMPUTATION overlapping MEMORY", 0}},
     {{1, 0.0}},
     {{1, 17832, 9688, 2, 6605, 10280212}}},
    {"trace_file_list",
     {{1, 1599, 30, 0, 1629}},
     {{1, 7u, 1599, 0, 0}},
     {{"COMPUTATION", 30}},
     {{1, -1}},
     {{1, 4, 3, 1, 0, 3}}},
    {"trace_compare/base",
     {{1, 0, 4, 0, 4}},
     {{1, 7u, 0, 0, 0}},
     {{"COMPUTATION", 4}},
     {{1, -1}},
     {{1, 1, 0, 0, 1, 57172}}},
    {"trace_compare/test",
     {{1, 0, 4, 0, 4}},
     {{1, 7u, 0, 0, 0}},
     {{"COMPUTATION", 4}},
     {{1, -1}},
     {{1, 1, 0, 0, 1, 57172}}},
    {"call_stack",
     {{0, 0, 45, 0, 45}},
     {{0, 7u, 0, 0, 0}},
     {{"COMPUTATION", 45}},
     {{0, -1}},
     {{0, 1, 0, 0, 1, 64125}}},
    {"triton_example",
     {{0, 0, 94, 0, 94}},
     {{0, 7u, 0, 0, 0}},
     {{"COMPUTATION", 94}},
     {{0, -1}},
     {{0, 0, 0, 0, 0, 0}}},
    {"critical_path/alexnet",
     {{0, 12929684, 10630, 55697, 12996011}},
     {{0, 7u, 12855007, 104, 0}, {0, 20u, 12011718, 3, 0}},
     {{"MEMORY", 55511}, {"COMPUTATION", 10630}},
     {{0, -1}},
     {{0, 98, 32, 11, 43, 39283}}},
    {"critical_path/simple_add",
     {{0, 16414376, 10670, 39293, 16464339}},
     {{0, 7u, 15976739, 91, 0}, {0, 20u, 13582776, 8, 0}},
     {{"MEMORY", 39088}, {"COMPUTATION", 10670}},
     {{0, -1}},
     {{0, 98, 37, 10, 22, 10264}}},
    {"critical_path/cuda_event_sync",
     {{0, 207, 49, 7, 263}},
     {{0, 7u, 212, 0, 0}},
     {{"COMPUTATION", 49}, {"MEMORY", 2}},
     {{0, -1}},
     {{0, 5, 3, 0, 0, 5}}},
    {"critical_path/cuda_event_sync_multi_stream",
     {{0, 19132, 369, 5, 19506}},
     {{0, 20u, 32, 0, 0}, {0, 28u, 0, 15, 0}, {0, 24u, 0, 15, 0}},
     {{"COMPUTATION", 369}, {"MEMORY", 3}},
     {{0, -1}},
     {{0, 6, 3, 0, 0, 18}}},
    {"execution_trace",
     {{0, 108903, 16, 0, 108919}},
     {{0, 7u, 108901, 2, 0}},
     {{"COMPUTATION", 16}},
     {{0, -1}},
     {{0, 4, 4, 0, 4, 15802}}},
  };
  return sets;
}

const std::string kData = std::string(LAGGARD_SHARED_TRACES) + "/kineto-hta/tests/data/";

// A set imported into a run and analysed as HTA does; nothing when the set is absent.
std::optional<HtaReport> hta_of(const std::string& dir) {
  if (!fs::is_directory(kData + dir)) return std::nullopt;
  laggard::testing::TempDir tmp;
  std::string run = (tmp.path / "run").string();
  for (const auto& e : fs::directory_iterator(kData + dir)) {
    std::string f = e.path().string();
    if (f.size() < 5 || (f.substr(f.size() - 3) != ".gz" && f.substr(f.size() - 5) != ".json")) continue;
    try {
      write_rank_file(import_kineto(f, {0}), run, "run");
    } catch (const std::runtime_error& e) {
      // execution_trace/ also holds a PyTorch execution trace (not Kineto); HTA finds no events in it.
      if (std::string(e.what()).find("not a Kineto trace") == std::string::npos) throw;
    }
  }
  return analyze_hta(read_run(run));
}

const HtaRank* rank_of(const HtaReport& h, int rank) {
  for (const auto& r : h.ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

void expect_temporal_breakdown(const SetRef& set, const HtaReport& h) {
  for (const TemporalRef& t : set.temporal) {
    const HtaRank* r = rank_of(h, t.rank);
    ASSERT_NE(r, nullptr) << "rank " << t.rank;
    EXPECT_EQ(r->idle_us, t.idle) << "rank " << t.rank;
    EXPECT_EQ(r->compute_us, t.compute) << "rank " << t.rank;
    EXPECT_EQ(r->non_compute_us, t.non_compute) << "rank " << t.rank;
    EXPECT_EQ(r->kernel_time_us, t.kernel_time) << "rank " << t.rank;
  }
}

void expect_idle_time_by_stream(const SetRef& set, const HtaReport& h) {
  for (const IdleRef& i : set.idle) {
    const HtaRank* r = rank_of(h, i.rank);
    ASSERT_NE(r, nullptr);
    auto it = r->idle_by_stream.find(i.stream);
    ASSERT_NE(it, r->idle_by_stream.end()) << "rank " << i.rank << " stream " << i.stream;
    EXPECT_EQ(it->second.host_wait_us, i.host_wait) << "rank " << i.rank << " stream " << i.stream;
    EXPECT_EQ(it->second.kernel_wait_us, i.kernel_wait) << "rank " << i.rank << " stream " << i.stream;
    EXPECT_EQ(it->second.other_us, i.other) << "rank " << i.rank << " stream " << i.stream;
  }
}

void expect_comm_comp_overlap(const SetRef& set, const HtaReport& h) {
  for (const OverlapRef& o : set.overlap) {
    const HtaRank* r = rank_of(h, o.rank);
    ASSERT_NE(r, nullptr);
    if (o.pctg < 0) {
      EXPECT_FALSE(r->overlap_pct.has_value()) << "rank " << o.rank;
    } else {
      ASSERT_TRUE(r->overlap_pct.has_value()) << "rank " << o.rank;
      EXPECT_NEAR(*r->overlap_pct, o.pctg, 0.0051) << "rank " << o.rank;
    }
  }
}

void expect_kernel_launch_stats(const SetRef& set, const HtaReport& h) {
  for (const LaunchRef& l : set.launch) {
    const HtaRank* r = rank_of(h, l.rank);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->launch.count, l.count) << "rank " << l.rank;
    EXPECT_EQ(r->launch.short_kernels, l.short_kernels) << "rank " << l.rank;
    EXPECT_EQ(r->launch.runtime_outliers, l.runtime_outliers) << "rank " << l.rank;
    EXPECT_EQ(r->launch.delay_outliers, l.delay_outliers) << "rank " << l.rank;
    EXPECT_EQ(r->launch.delay_sum_us, l.delay_sum) << "rank " << l.rank;
  }
}

// One test per trace set, each metric a named step: ctest runs every test in its own process, so a
// test per metric imported every set five times (45 s each under ASan at -O0).
class HtaParity : public ::testing::TestWithParam<size_t> {};

TEST_P(HtaParity, EveryMetricMatchesHta) {
  const SetRef& set = references().at(GetParam());
  const std::optional<HtaReport> h = hta_of(set.dir);
  if (!h) GTEST_SKIP() << "HTA's traces are absent (" << kData << set.dir << "); skipped";
  {
    SCOPED_TRACE("temporal breakdown");
    expect_temporal_breakdown(set, *h);
  }
  {
    SCOPED_TRACE("idle time breakdown per stream");
    expect_idle_time_by_stream(set, *h);
  }
  {
    SCOPED_TRACE("kernel type breakdown with overlaps");
    EXPECT_EQ(h->kernel_types_us, set.kernel_types);
  }
  {
    SCOPED_TRACE("communication computation overlap");
    expect_comm_comp_overlap(set, *h);
  }
  {
    SCOPED_TRACE("CUDA kernel launch statistics");
    expect_kernel_launch_stats(set, *h);
  }
}

INSTANTIATE_TEST_SUITE_P(TraceSets, HtaParity, ::testing::Range<size_t>(0, references().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = references()[info.param].dir;  // "trace_diff/test" -> trace_diff_test
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(uint8_t(c)); }, '_');
                           return name;
                         });

// hta/common/types.py's grouping patterns, tested in HTA's order (communication, memory, compute).
TEST(HtaKernelTypes, NamesFollowHtaPatterns) {
  EXPECT_EQ(hta_kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "COMMUNICATION");
  EXPECT_EQ(hta_kernel_type("void foo<ncclKernel_x>()"), "COMMUNICATION");
  EXPECT_EQ(hta_kernel_type("Memcpy HtoD (Pinned -> Device)"), "MEMORY");
  EXPECT_EQ(hta_kernel_type("Stream Sync"), "OTHER");
  EXPECT_EQ(hta_kernel_type("void cudnn::bn_bw_1C11_kernel_new<float>(float)"), "COMPUTATION");
}

RankData two_kernels(int64_t gap_ns, int64_t launch_end_into_gap_ns) {
  RankData r;
  CaptureWindow w;
  w.start_ns = 0;
  w.end_ns = 1'000'000;
  w.gpu_sampled = true;
  GpuActivity a;
  a.start_ns = 100'000;
  a.end_ns = 200'000;
  a.api_start_ns = 10'000;
  a.api_end_ns = 20'000;
  GpuActivity b = a;
  b.start_ns = a.end_ns + gap_ns;
  b.end_ns = b.start_ns + 50'000;
  b.api_start_ns = a.end_ns + launch_end_into_gap_ns - 5'000;
  b.api_end_ns = a.end_ns + launch_end_into_gap_ns;
  w.gpu = {a, b};
  r.windows.push_back(w);
  return r;
}

// HTA's cut is 30 in the trace's unit, µs (its docstring says ns); laggard's default was 30 ns.
TEST(LaggardBreakdown, KernelWaitCutIs30MicrosecondsAsInHta) {
  RankData r = two_kernels(10'000, -50'000);  // 10 µs gap, launched long before
  IdleSplit s = split_idle(index_gpu(r), 0, 1'000'000, BreakdownOptions{}.kernel_wait_ns);
  EXPECT_EQ(s.kernel_wait_ns, 10'000);
  EXPECT_EQ(s.other_ns, 0);
}

// HTA tests host wait before kernel wait: a short gap the host caused is host wait.
TEST(LaggardBreakdown, HostWaitIsTestedBeforeKernelWait) {
  RankData r = two_kernels(10'000, 4'000);  // the launch call returned 4 µs into a 10 µs gap
  IdleSplit s = split_idle(index_gpu(r), 0, 1'000'000, 30'000);
  EXPECT_EQ(s.host_wait_ns, 4'000);
  EXPECT_EQ(s.other_ns, 6'000);
  EXPECT_EQ(s.kernel_wait_ns, 0);
}

}  // namespace hta_parity_test
