// The pieces under GpuCapture: correlation table, buffer pool, record parser, loader search.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "activity_parser.h"
#include "buffer_pool.h"
#include "correlation_table.h"
#include "cupti_loader.h"
#include "gpu_aggregator.h"
#include "records.h"
#include "temp_dir.h"

namespace laggard::cupti {
namespace cupti_parts_test {

TEST(CorrelationTable, FindsWhatEnterAndExitWrote) {
  CorrelationTable t(64);
  t.enter(5, 11, 1234, 100);
  LaunchInfo li{};
  ASSERT_TRUE(t.find(5, &li));
  EXPECT_EQ(li.section, 11u);
  EXPECT_EQ(li.tid, 1234u);
  EXPECT_EQ(li.api_start_ns, 100);
  EXPECT_EQ(li.api_end_ns, 0);  // not returned yet
  t.exit(5, 250);
  ASSERT_TRUE(t.find(5, &li));
  EXPECT_EQ(li.api_end_ns, 250);
  EXPECT_FALSE(t.find(6, &li));
  EXPECT_FALSE(t.find(0, &li));
}

TEST(CorrelationTable, ReusedSlotForgetsTheOldId) {
  CorrelationTable t(64);
  t.enter(3, 1, 1, 10);
  t.enter(3 + 64, 2, 1, 20);
  LaunchInfo li{};
  EXPECT_FALSE(t.find(3, &li));
  ASSERT_TRUE(t.find(67, &li));
  EXPECT_EQ(li.section, 2u);
  t.exit(3, 99);  // a late exit of the evicted id changes nothing
  ASSERT_TRUE(t.find(67, &li));
  EXPECT_EQ(li.api_end_ns, 0);
}

TEST(CorrelationTable, ConcurrentWritersAndReaderNeverSeeAForeignEntry) {
  CorrelationTable t(1024);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, hits{0};
  // Each writer owns ids with id % 4 == w and writes section == id, so any torn read shows.
  std::vector<std::thread> writers;
  for (uint32_t w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      for (uint32_t id = 4 + w; id < 400000; id += 4) t.enter(id, id, w, id);
    });
  std::thread reader([&] {
    while (!stop.load()) {
      for (uint32_t id = 1; id < 400000; id += 97) {
        LaunchInfo li{};
        if (t.find(id, &li)) {
          hits.fetch_add(1);
          if (li.section != id || li.api_start_ns != id) bad.fetch_add(1);
        }
      }
    }
  });
  for (auto& w : writers) w.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0u);
}

TEST(BufferPool, HandsOutUpToTheLimitThenDeclines) {
  BufferPool p(1000, 2);
  EXPECT_EQ(p.buffer_bytes() % 8, 0u);
  uint8_t* a = p.acquire();
  uint8_t* b = p.acquire();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(p.acquire(), nullptr);
  EXPECT_EQ(p.declined(), 1u);
  p.release(a);
  EXPECT_EQ(p.acquire(), a);  // reused, not reallocated
  EXPECT_EQ(p.allocated(), 2u);
  int stranger = 0;
  p.release(reinterpret_cast<uint8_t*>(&stranger));  // not ours: ignored
  p.release(b);
  p.release(b);  // twice: once
  EXPECT_EQ(p.outstanding(), 1u);
}

// Issue 26 item 2: a CUPTI before API version 27 may crash when refused a buffer: it gets one
// beyond the pool, counted, freed when it comes back (the pool returns to its bound).
TEST(BufferPool, NeverDeclinesWhenDecliningIsNotSafe) {
  BufferPool p(1000, 1);
  uint8_t* a = p.acquire(false);
  uint8_t* extra = p.acquire(false);
  ASSERT_TRUE(a && extra);
  EXPECT_NE(a, extra);
  EXPECT_TRUE(p.owns(extra));
  EXPECT_EQ(p.declined(), 1u);
  EXPECT_EQ(p.overflowed(), 1u);
  EXPECT_EQ(p.outstanding(), 2u);
  p.release(extra);
  EXPECT_FALSE(p.owns(extra));  // freed, not pooled
  EXPECT_EQ(p.allocated(), 1u);
  EXPECT_EQ(p.acquire(true), nullptr);  // a CUPTI that may be refused is
  EXPECT_EQ(p.forget_outstanding(), 1u);  // a (another client's cuptiFinalize)
  EXPECT_EQ(p.allocated(), 0u);
  EXPECT_NE(p.acquire(true), nullptr);  // room again
}

TEST(ActivityParser, ReadsCuda13KernelRecords) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1000;
  k.end = 1500;
  k.deviceId = 2;
  k.streamId = 13;
  k.gridX = 64, k.gridY = 2, k.gridZ = 1;
  k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.correlationId = 77;
  k.name = "_Z4gemmPf";
  k.graphId = 0;
  GpuRecord r;
  ASSERT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::ok);
  EXPECT_EQ(r.kind, RecordKind::kernel);
  EXPECT_STREQ(r.name, "_Z4gemmPf");
  EXPECT_EQ(r.start, 1000u);
  EXPECT_EQ(r.end, 1500u);
  EXPECT_EQ(r.device, 2u);
  EXPECT_EQ(r.stream, 13u);
  EXPECT_EQ(r.correlation, 77u);
  EXPECT_EQ(r.grid, (std::array<uint32_t, 3>{64, 2, 1}));
  EXPECT_EQ(r.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_FALSE(r.graph);
}

TEST(ActivityParser, ReadsCuda12KernelRecordsTheSameWay) {
  CUpti_ActivityKernel9 k{};  // what CUPTI 12 delivers
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  k.start = 10;
  k.end = 30;
  k.gridX = 3, k.gridY = 1, k.gridZ = 1;
  k.blockX = 32, k.blockY = 4, k.blockZ = 1;
  k.correlationId = 5;
  k.name = "k9";
  k.graphId = 8;
  GpuRecord r;
  ASSERT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::ok);
  EXPECT_STREQ(r.name, "k9");
  EXPECT_EQ(r.correlation, 5u);
  EXPECT_EQ(r.block, (std::array<uint32_t, 3>{32, 4, 1}));
  EXPECT_TRUE(r.graph);
}

TEST(ActivityParser, MemcpyMemsetOtherKindsAndMissingTimestamps) {
  CUpti_ActivityMemcpy5 m{};  // CUDA 12 layout
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = 1 << 20;
  m.start = 1;
  m.end = 2;
  m.correlationId = 9;
  GpuRecord r;
  ASSERT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&m), &r), ParseResult::ok);
  EXPECT_EQ(r.kind, RecordKind::memcpy);
  EXPECT_EQ(r.bytes, 1u << 20);
  EXPECT_STREQ(memcpy_label(r.copy_kind), "[memcpy DtoH]");

  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 64;
  s.start = 5;
  s.end = 6;
  ASSERT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&s), &r), ParseResult::ok);
  EXPECT_EQ(r.kind, RecordKind::memset);

  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&api), &r), ParseResult::other_kind);
  EXPECT_EQ(parse_record(nullptr, &r), ParseResult::other_kind);

  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::no_timestamp);
  k.start = 10;
  k.end = 5;
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::no_timestamp);
}

// Found by fuzz_cupti (tests/fuzz): a corrupt record's timestamp near 2^63 overflowed int64_t
// when mapped to the host clock (GpuClockMap::to_epoch, undefined behaviour in the host
// process). Times past kMaxTimestamp and durations past kMaxDuration count as no timestamp.
TEST(ActivityParser, TimesNoClockGivesCountAsNoTimestamp) {
  GpuRecord r;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'700'000'000'000'000'000;
  k.end = k.start + 1000;
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::ok);
  k.end = uint64_t{7'588'565'372'119'285'760};  // the fuzzer's: past 2^62
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::no_timestamp);
  k.start = 1;
  k.end = kMaxDuration + 2;  // a plausible end, but 104 days after the start
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&k), &r), ParseResult::no_timestamp);
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.start = 5;
  m.end = UINT64_MAX;
  EXPECT_EQ(parse_record(reinterpret_cast<CUpti_Activity*>(&m), &r), ParseResult::no_timestamp);
}

TEST(ActivityParser, NcclKernelNames) {
  EXPECT_TRUE(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(is_nccl_kernel("_Z28ncclDevKernel_AllGather_RING_LLP11ncclDevComm"));
  EXPECT_TRUE(is_nccl_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"));
  EXPECT_TRUE(is_nccl_kernel("ncclDevFunc_Broadcast_RING_LL"));
  EXPECT_FALSE(is_nccl_kernel("ampere_sgemm_128x64_nn"));
  EXPECT_FALSE(is_nccl_kernel("nccl_like_but_not"));
  EXPECT_FALSE(is_nccl_kernel(nullptr));
}

TEST(GpuAggregator, MedianOfALargeKeyIsFromAUniformSample) {
  GpuAggregator agg(10, 64);
  GpuRecord r;
  r.name = "k";
  for (uint64_t i = 0; i < 10000; ++i) {
    r.start = 1000 + i;
    r.end = r.start + 1 + (i % 1000);  // uniform 1..1000: median ~500
    agg.add(r, nullptr);
  }
  GpuWindow w = agg.close(0, 0, nullptr);
  ASSERT_EQ(w.kernels.size(), 1u);
  EXPECT_EQ(w.kernels[0].count, 10000u);
  EXPECT_EQ(w.kernels[0].min_ns, 1);
  EXPECT_EQ(w.kernels[0].max_ns, 1000);
  EXPECT_NEAR(double(w.kernels[0].median_ns), 500, 200);
}

TEST(CuptiLoader, ExplicitPathIsTheOnlyPlaceTried) {
  EXPECT_EQ(cupti_candidates({"/opt/x/libcupti.so.12", "/cuda"}), std::vector<std::string>{"/opt/x/libcupti.so.12"});
  auto dir = cupti_candidates({"/tmp", ""});
  ASSERT_EQ(dir.size(), 12u);  // libcupti.so.13, .12, .11.8 ... .11.0, .so
  EXPECT_EQ(dir[0], "/tmp/libcupti.so.13");
  EXPECT_EQ(dir[1], "/tmp/libcupti.so.12");
}

TEST(CuptiLoader, DefaultOrderCudaHomeThenUsrLocalCudaThenLoaderPath) {
  auto c = cupti_candidates({"", "/opt/cuda-13"});
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.front(), "/opt/cuda-13/lib64/libcupti.so.13");
  EXPECT_NE(std::find(c.begin(), c.end(), "/opt/cuda-13/extras/CUPTI/lib64/libcupti.so.12"), c.end());
  EXPECT_NE(std::find(c.begin(), c.end(), "/usr/local/cuda/lib64/libcupti.so.13"), c.end());
  EXPECT_EQ(c.back(), "libcupti.so");
}

TEST(CuptiLoader, MissingLibraryIsAnErrorNamingWhereItLooked) {
  LoadResult r = load_cupti({"/nonexistent/libcupti.so.13", ""});
  EXPECT_EQ(r.api, nullptr);
  EXPECT_NE(r.error.find("/nonexistent/libcupti.so.13"), std::string::npos) << r.error;
}

TEST(CuptiLoader, ALibraryWithoutCuptiFunctionsIsRejected) {
  LoadResult r = load_cupti({"libc.so.6", ""});
  EXPECT_EQ(r.api, nullptr);
  EXPECT_NE(r.error.find("no cuptiSubscribe"), std::string::npos) << r.error;
}

TEST(CuptiLoader, NoDriverLoadedMeansCudaIsNotInitialized) {
  // This test process never loads libcuda.so.1; the check must not load it either.
  EXPECT_FALSE(cuda_initialized());
  std::ifstream maps("/proc/self/maps");
  std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("libcuda.so"), std::string::npos);
}

// Issue 9 item 9: which libcupti.
TEST(CuptiLoader, SonamesFollowTheDriversCudaVersion) {
  using V = std::vector<std::string>;
  // A CUDA 12.4 driver: CUPTI 13 would answer CUPTI_ERROR_NOT_INITIALIZED, so it comes last.
  const V cuda11 = {"libcupti.so.11.8", "libcupti.so.11.7", "libcupti.so.11.6", "libcupti.so.11.5", "libcupti.so.11.4",
                    "libcupti.so.11.3", "libcupti.so.11.2", "libcupti.so.11.1", "libcupti.so.11.0"};
  auto with = [](V head, const V& mid, V tail) {
    head.insert(head.end(), mid.begin(), mid.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  EXPECT_EQ(cupti_sonames(12040), with({"libcupti.so.12"}, cuda11, {"libcupti.so.13", "libcupti.so"}));
  EXPECT_EQ(cupti_sonames(13000), with({"libcupti.so.13", "libcupti.so.12"}, cuda11, {"libcupti.so"}));
  EXPECT_EQ(cupti_sonames(0), with({"libcupti.so.13", "libcupti.so.12"}, cuda11, {"libcupti.so"}));
}

// Issue 26 item 7: CUDA 11's CUPTI carries its minor version in the soname (a cu118 wheel ships
// nvidia/cuda_cupti/lib/libcupti.so.11.8); a CUDA 11.4 driver gets 11.4 and older first.
TEST(CuptiLoader, Cuda11SonamesCarryTheMinorVersion) {
  auto names = cupti_sonames(11040);
  ASSERT_GE(names.size(), 10u);
  EXPECT_EQ(names[0], "libcupti.so.11.4");
  EXPECT_EQ(names[4], "libcupti.so.11.0");
  EXPECT_EQ(names[5], "libcupti.so.11.5");
  EXPECT_EQ(names[8], "libcupti.so.11.8");
  EXPECT_NE(std::find(names.begin(), names.end(), "libcupti.so.13"), names.end());
  laggard::testing::TempDir dir("laggard-cupti-cu118");
  std::filesystem::copy_file(LAGGARD_FAKE_CUDA, dir.path / "libcupti.so.11.8");  // a cu118 wheel's copy
  LoaderOptions o;
  o.driver_version = 11080;
  o.wheel_dirs = {dir.path.string()};
  o.cuda_home = "/nonexistent";
  LoadResult r = load_cupti(o, [](CuptiApi&, std::string*) { return Accept::use; });
  ASSERT_NE(r.api, nullptr) << r.error;
  EXPECT_EQ(r.api->describe(), (dir.path / "libcupti.so.11.8").string());
}

TEST(CuptiLoader, TheErrorNamesEachFileAndGroupsWhatWasNotFound) {
  laggard::testing::TempDir dir("laggard-cupti-empty");
  LoadResult r = load_cupti({dir.path.string(), ""});
  EXPECT_EQ(r.api, nullptr);
  EXPECT_NE(r.error.find("not found: " + dir.path.string() + "/{libcupti.so.13,libcupti.so.12,libcupti.so.11.8"),
            std::string::npos)
      << r.error;
  LoadResult libc = load_cupti({"libc.so.6", ""});
  EXPECT_NE(libc.error.find("libc.so.6: no cuptiSubscribe"), std::string::npos) << libc.error;
}

TEST(CuptiLoader, LooksNextToALoadedCudartAndInPipWheelsBeforeTheToolkit) {
  LoaderOptions o;
  o.driver_version = 12040;
  o.cudart_dirs = {"/sp/nvidia/cuda_runtime/lib"};
  o.wheel_dirs = {"/sp/nvidia/cuda_cupti/lib"};
  o.cuda_home = "/opt/cuda";
  auto c = cupti_candidates(o);
  auto pos = [&](const std::string& p) { return std::find(c.begin(), c.end(), p) - c.begin(); };
  ASSERT_LT(pos("/sp/nvidia/cuda_runtime/lib/libcupti.so.12"), long(c.size()));
  EXPECT_EQ(c[0], "/sp/nvidia/cuda_runtime/lib/libcupti.so.12");
  EXPECT_LT(pos("/sp/nvidia/cuda_runtime/lib/../../cuda_cupti/lib/libcupti.so.12"),
            pos("/sp/nvidia/cuda_cupti/lib/libcupti.so.12"));
  EXPECT_LT(pos("/sp/nvidia/cuda_cupti/lib/libcupti.so.12"), pos("/opt/cuda/lib64/libcupti.so.12"));
  EXPECT_LT(pos("/opt/cuda/lib64/libcupti.so.12"), pos("/usr/local/cuda/lib64/libcupti.so.12"));
  EXPECT_LT(pos("/sp/nvidia/cuda_cupti/lib/libcupti.so.12"), pos("/sp/nvidia/cuda_cupti/lib/libcupti.so.13"));
  EXPECT_EQ(c.back(), "libcupti.so");
}

TEST(CuptiLoader, MovesOnToTheNextCandidateWhenCuptiIsNotInitialized) {
  laggard::testing::TempDir dir("laggard-cupti-loader");
  // Two distinct files with every CUPTI function (copies of the fake driver), as a CUPTI 13
  // and a CUPTI 12 in one directory.
  std::filesystem::copy_file(LAGGARD_FAKE_CUDA, dir.path / "libcupti.so.13");
  std::filesystem::copy_file(LAGGARD_FAKE_CUDA, dir.path / "libcupti.so.12");
  std::vector<std::string> offered;
  auto accept = [&](CuptiApi& api, std::string* why) {
    offered.push_back(api.describe());
    if (offered.size() == 1) {
      *why = "CUPTI_ERROR_NOT_INITIALIZED";
      return Accept::next;
    }
    return Accept::use;
  };
  LoadResult r = load_cupti({dir.path.string(), ""}, accept);
  ASSERT_NE(r.api, nullptr) << r.error;
  ASSERT_EQ(offered.size(), 2u);
  EXPECT_EQ(offered[0], (dir.path / "libcupti.so.13").string());
  EXPECT_EQ(r.api->describe(), (dir.path / "libcupti.so.12").string());
  uint32_t v = 0;
  EXPECT_EQ(r.api->version(&v), CUPTI_SUCCESS);  // optional functions are found too
  // Nobody accepting: the error names each refusal.
  LoadResult none = load_cupti({dir.path.string(), ""}, [](CuptiApi&, std::string* why) {
    *why = "CUPTI_ERROR_NOT_INITIALIZED";
    return Accept::next;
  });
  EXPECT_EQ(none.api, nullptr);
  EXPECT_NE(none.error.find("libcupti.so.12: CUPTI_ERROR_NOT_INITIALIZED"), std::string::npos) << none.error;
}

TEST(CuptiLoader, DiscoversTheDriverVersionCudartAndWheelsFromLoadedLibraries) {
  laggard::testing::TempDir dir("laggard-cupti-discover");
  namespace fs = std::filesystem;
  fs::path sp = dir.path / "venv/lib/python3.12/site-packages";
  fs::create_directories(sp / "nvidia/cuda_runtime/lib");
  fs::create_directories(sp / "nvidia/cuda_cupti/lib");
  fs::create_directories(dir.path / "driver");
  // Copies of the fake driver stand in for libcuda.so.1 (cuDriverGetVersion: 13000) and for a
  // wheel's libcudart; a process using PyTorch from a venv has both loaded.
  fs::copy_file(LAGGARD_FAKE_CUDA, dir.path / "driver/libcuda.so.1");
  fs::copy_file(LAGGARD_FAKE_CUDA, sp / "nvidia/cuda_runtime/lib/libcudart.so.12");
  ASSERT_NE(dlopen((dir.path / "driver/libcuda.so.1").c_str(), RTLD_NOW | RTLD_LOCAL), nullptr) << dlerror();
  ASSERT_NE(dlopen((sp / "nvidia/cuda_runtime/lib/libcudart.so.12").c_str(), RTLD_NOW | RTLD_LOCAL), nullptr);
  LoaderOptions o;
  discover_loaded(o);
  EXPECT_EQ(o.driver_version, 13000);
  ASSERT_EQ(o.cudart_dirs.size(), 1u);
  EXPECT_EQ(o.cudart_dirs[0], (sp / "nvidia/cuda_runtime/lib").string());
  std::set<std::string> wheels(o.wheel_dirs.begin(), o.wheel_dirs.end());
  EXPECT_TRUE(wheels.count((sp / "nvidia/cuda_cupti/lib").string())) << o.wheel_dirs.size();
  EXPECT_TRUE(wheels.count((sp / "nvidia/cuda_runtime/lib").string()));
}

}  // namespace
}  // namespace laggard::cupti
