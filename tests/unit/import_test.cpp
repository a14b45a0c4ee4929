// `laggard import` on real traces recorded by others (../shared/traces, see its README): Kineto
// traces from HTA's test data and Nsight Systems exports from pipit's. Tests skip with a message
// when the traces are absent; they are never copied into the project.
#include <sqlite3.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "import_command.h"
#include "import_kineto.h"
#include "import_nsys.h"
#include "reader.h"
#include "report_command.h"
#include "temp_dir.h"

using namespace laggard::report;
namespace fs = std::filesystem;

namespace import_test {

const std::string kTraces = LAGGARD_SHARED_TRACES;
const std::string kHta = kTraces + "/kineto-hta/tests/data";

#define REQUIRE_TRACE(path)                                                                         \
  if (!fs::exists(path)) GTEST_SKIP() << "real trace " << (path) << " absent (../shared/traces); skipped"

size_t count_kind(const ImportedRank& r, GpuKind k) {
  size_t n = 0;
  for (const auto& a : r.gpu) n += a.kind == k;
  return n;
}

size_t count_linked(const ImportedRank& r) {
  size_t n = 0;
  for (const auto& a : r.gpu) n += a.api_end_ns != 0;
  return n;
}

const GpuActivity* find_correlation(const ImportedRank& r, uint32_t corr) {
  for (const auto& a : r.gpu)
    if (a.correlation == corr) return &a;
  return nullptr;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Counts from the file itself (python json over the .gz): 1154 kernel, 40 gpu_memcpy, 10 gpu_memset,
// 73 user_annotation events, distributedInfo {"rank": 0, "world_size": 128}.
TEST(ImportKineto, TwoRanksOf128RankJobReadBackAsOneRun) {
  REQUIRE_TRACE(kHta + "/trace_filter/sampled_rank-0.json.gz");
  laggard::testing::TempDir tmp;
  for (int rank : {0, 1}) {
    ImportedRank r = import_kineto(kHta + "/trace_filter/sampled_rank-" + std::to_string(rank) + ".json.gz");
    EXPECT_EQ(r.rank, rank);
    EXPECT_EQ(r.world_size, 128);
    EXPECT_EQ(r.rank_source, "distributedInfo.rank");
    if (rank == 0) {
      EXPECT_EQ(count_kind(r, GpuKind::kernel), 1154u);
      EXPECT_EQ(count_kind(r, GpuKind::memcpy), 40u);
      EXPECT_EQ(count_kind(r, GpuKind::memset), 10u);
      EXPECT_EQ(r.ranges.size(), 73u);
      EXPECT_EQ(r.collectives.size(), 10u);  // ncclKernel_SendRecv_... kernels
    }
    write_rank_file(r, (tmp.path / "run").string(), "run");
  }
  RunModel m = read_run((tmp.path / "run").string());
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.world_size, 128);
  size_t missing = 0;
  for (const auto& p : m.problems)
    if (p.kind == "missing_rank") {
      ++missing;
      EXPECT_EQ(p.message, "ranks 2-127 (126 ranks) wrote no readable file (world size 128)");
    }
  EXPECT_EQ(missing, 1u);  // one entry for the run of absent ranks, not 126
  size_t gpu = 0, steps = 0;
  for (const auto& w : m.ranks[0].windows) {
    gpu += w.gpu.size();
    for (const auto& s : w.sections) steps += s.name == "ProfilerStep" ? s.count : 0;
  }
  EXPECT_EQ(gpu, 1204u);
  EXPECT_EQ(steps, 2u);  // ProfilerStep#N, one section
  EXPECT_EQ(m.ranks[0].windows.size(), 2u);  // one window per step (the first opens the trace)
}

// Old Kineto spells the categories Kernel / Runtime and writes integer epoch µs.
TEST(ImportKineto, OldSpellingsKernelAndRuntime) {
  REQUIRE_TRACE(kHta + "/trace_file_list/inference_rank_1.json.gz");
  ImportedRank r = import_kineto(kHta + "/trace_file_list/inference_rank_1.json.gz");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(count_kind(r, GpuKind::kernel), 4u);
  const GpuActivity* k = find_correlation(r, 538860);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->start_ns, 1665536373729077000);
  EXPECT_EQ(k->end_ns - k->start_ns, 4000);
  EXPECT_EQ(k->api_start_ns, 1665536373729065000);  // its cudaLaunchKernel (Runtime)
  EXPECT_EQ(k->api_end_ns, 1665536373729065000 + 1414000);
  EXPECT_EQ(k->stream, 7u);
  EXPECT_EQ(k->grid[0], 64u);
  EXPECT_EQ(k->block[0], 128u);
}

// Newer Kineto: fractional µs relative to baseTimeNanoseconds, read exactly (not through a double).
TEST(ImportKineto, FractionalMicrosecondsPlusBaseTime) {
  REQUIRE_TRACE(kHta + "/nccl_parser_config/nccl_data.json.gz");
  ImportedRank r = import_kineto(kHta + "/nccl_parser_config/nccl_data.json.gz");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 2);
  // The cudnn kernel of ../shared/notes/kineto-format.md: ts 4458676983543.183, dur 41.407,
  // its cudaLaunchKernel ts 4458676983526.767 dur 15.633; base 1711964646000000000.
  const GpuActivity* k = find_correlation(r, 57541);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->start_ns, 1711964646000000000 + 4458676983543183);
  EXPECT_EQ(k->end_ns - k->start_ns, 41407);
  EXPECT_EQ(k->api_start_ns, 1711964646000000000 + 4458676983526767);
  EXPECT_EQ(k->api_end_ns - k->api_start_ns, 15633);
  // The NCCL allreduce kernel with PyTorch's NCCL args.
  const GpuActivity* n = find_correlation(r, 60047);
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->nccl);
  bool found = false;
  for (const auto& c : r.collectives)
    if (&r.gpu[c.gpu_index] == n) {
      found = true;
      EXPECT_EQ(r.strings.at(c.func), "AllReduce");
      EXPECT_EQ(r.strings.at(c.algo), "RING");
      EXPECT_EQ(r.strings.at(c.proto), "LL");
      EXPECT_EQ(c.count, 6637568u);
      EXPECT_EQ(c.bytes, 6637568u * 4);
      EXPECT_EQ(c.group_size, 2);
      EXPECT_EQ(r.strings.at(c.comm_name), "default_pg");
    }
  EXPECT_TRUE(found);
}

// Triton launches through the driver API (cuLaunchKernel, cat cuda_driver).
TEST(ImportKineto, DriverLaunchesLinkByCorrelation) {
  REQUIRE_TRACE(kHta + "/triton_example/triton_example.json.gz");
  ImportedRank r = import_kineto(kHta + "/triton_example/triton_example.json.gz", {0});
  const GpuActivity* k = find_correlation(r, 35);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->api_start_ns, 1727743122000000000 + 2413669097399166);
  EXPECT_EQ(k->api_end_ns - k->api_start_ns, 47768);
  EXPECT_EQ(r.rank_source, "--rank");  // triton_example has no distributedInfo
}

TEST(ImportKineto, SectionsAttributedToTheLaunchingThreadsRange) {
  REQUIRE_TRACE(kHta + "/trace_filter/sampled_rank-0.json.gz");
  ImportedRank r = import_kineto(kHta + "/trace_filter/sampled_rank-0.json.gz");
  size_t in_section = 0;
  for (const auto& a : r.gpu) in_section += a.section != StringTable::kNone;
  // The backward pass is launched from autograd threads, which have no ranges of their own: as in
  // capture, those launches take the main thread's innermost open range ("## backward ##", ...).
  EXPECT_GT(in_section, r.gpu.size() * 9 / 10) << in_section << " of " << r.gpu.size();
  EXPECT_EQ(count_linked(r), r.gpu.size());  // every GPU event of this trace has its launch call
}

TEST(ImportKineto, NoRankInformationIsAClearErrorNotAGuess) {
  for (const char* f : {"/distributed_info_unavailable/distributed_info_not_found.json.gz",
                        "/rank_unavailable/rank_not_found.json.gz"}) {
    REQUIRE_TRACE(kHta + f);
    try {
      import_kineto(kHta + f);
      ADD_FAILURE() << f << " imported without rank";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no rank information"), std::string::npos) << e.what();
    }
    EXPECT_EQ(import_kineto(kHta + f, {5}).rank, 5);
  }
}

TEST(ImportKineto, TruncatedGzipIsOneClearError) {
  REQUIRE_TRACE(kHta + "/trace_filter/sampled_rank-1.json.gz");
  laggard::testing::TempDir tmp;
  std::string gz = slurp(kHta + "/trace_filter/sampled_rank-1.json.gz");
  spit(tmp.path / "cut.json.gz", gz.substr(0, gz.size() / 2));
  try {
    import_kineto((tmp.path / "cut.json.gz").string());
    FAIL() << "a truncated .json.gz imported";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(ImportKineto, JsonThatIsNotKinetoIsOneClearError) {
  laggard::testing::TempDir tmp;
  spit(tmp.path / "a.json", R"({"schema": "something else", "events": [1, 2, 3]})");
  spit(tmp.path / "b.json", R"([{"ph": "X"}])");
  spit(tmp.path / "c.json", "hello");
  spit(tmp.path / "d.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel")");
  auto message = [&](const char* f) {
    try {
      import_kineto((tmp.path / f).string(), {0});
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(imported)");
  };
  EXPECT_NE(message("a.json").find("not a Kineto trace"), std::string::npos) << message("a.json");
  EXPECT_NE(message("b.json").find("not a Kineto trace"), std::string::npos) << message("b.json");
  EXPECT_NE(message("c.json").find("not a JSON trace"), std::string::npos) << message("c.json");
  EXPECT_NE(message("d.json").find("truncated or invalid JSON"), std::string::npos) << message("d.json");
  EXPECT_NE(message("missing.json").find("cannot open"), std::string::npos) << message("missing.json");
}

// cloverleaf-cuda-rank0.sqlite: 1312 kernels, 279 memcpys, CUDA runtime, no NVTX (README there).
TEST(ImportNsys, CloverLeafKernelsMemcpysAndLaunches) {
  const std::string f = kTraces + "/nsys/cloverleaf-cuda-rank0.sqlite";
  REQUIRE_TRACE(f);
  ImportedRank r = import_nsys(f);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.rank_source, "file name");
  EXPECT_EQ(count_kind(r, GpuKind::kernel), 1312u);
  EXPECT_EQ(count_kind(r, GpuKind::memcpy), 279u);
  EXPECT_EQ(count_linked(r), r.gpu.size());
  EXPECT_GT(r.gpu.front().start_ns, 1'500'000'000'000'000'000);  // epoch ns via the session start
  laggard::testing::TempDir tmp;
  write_rank_file(r, (tmp.path / "run").string(), "run");
  RunModel m = read_run((tmp.path / "run").string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.at(0).gpu.size(), 1312u + 279u);
}

// saxpy-mpi-cuda-rank0.sqlite: a newer nsys schema (no greenContextId; memcpy has a name column),
// NVTX ranges.
TEST(ImportNsys, SaxpyNewerSchemaWithNvtxRanges) {
  const std::string f = kTraces + "/nsys/saxpy-mpi-cuda-rank0.sqlite";
  REQUIRE_TRACE(f);
  ImportedRank r = import_nsys(f, {3});
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(count_kind(r, GpuKind::kernel), 5u);
  EXPECT_EQ(count_kind(r, GpuKind::memcpy), 15u);
  EXPECT_FALSE(r.ranges.empty());
  size_t in_section = 0;
  for (const auto& a : r.gpu) in_section += a.section != StringTable::kNone;
  EXPECT_GT(in_section, 0u);
}

TEST(ImportNsys, SqliteFromAnotherProgramIsOneClearError) {
  laggard::testing::TempDir tmp;
  std::string other = (tmp.path / "rank0-other.sqlite").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE moz_places (id INTEGER, url TEXT); INSERT INTO moz_places VALUES (1, 'x');",
               nullptr, nullptr, nullptr);
  sqlite3_close(db);
  spit(tmp.path / "rank0-text.sqlite", "this is not a database, just text long enough to have a header......");
  auto message = [&](const std::string& f) {
    try {
      import_nsys(f);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(imported)");
  };
  EXPECT_NE(message(other).find("not an Nsight Systems export"), std::string::npos) << message(other);
  std::string text = (tmp.path / "rank0-text.sqlite").string();
  EXPECT_NE(message(text).find("not an SQLite database"), std::string::npos) << message(text);
}

// Seen reviewing the importer for fuzz_kineto (tests/fuzz): numbers no trace holds were
// converted with undefined behaviour (a double beyond int64_t), or threw std::out_of_range (a
// base time past int64_t).
// An event whose times are impossible is left out and counted; a header value that cannot be
// used fails the import naming it.
TEST(ImportKineto, ImpossibleNumbersAreLeftOutOrRefusedNeverConverted) {
  laggard::testing::TempDir tmp;
  auto trace = [&](const std::string& head, const std::string& events) {
    fs::path f = tmp.path / "t.json";
    spit(f, "{" + head + "\"traceEvents\": [" + events + "]}");
    return f.string();
  };
  const std::string good =
      R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 5, "args": {"correlation": 1e300, "stream": -1e300,)"
      R"( "bytes": 1e300, "grid": [1e300, -4, 2], "block": [32, 1, 1]}})";
  ImportedRank r = import_kineto(
      trace(R"("distributedInfo": {"rank": 0, "world_size": 1000000000000},)",
            good + R"(, {"ph": "X", "cat": "kernel", "name": "far", "ts": 1e300, "dur": 5},)"
                   R"( {"ph": "X", "cat": "kernel", "name": "long", "ts": 99999999999999999999999, "dur": 5},)"
                   R"( {"ph": "X", "cat": "kernel", "name": "negative", "ts": 20, "dur": -5})"));
  ASSERT_EQ(r.gpu.size(), 1u);
  EXPECT_EQ(r.gpu[0].start_ns, 10'000);
  EXPECT_EQ(r.gpu[0].grid[0], 0u);  // not a dimension: unknown
  EXPECT_EQ(r.gpu[0].grid[1], 0u);
  EXPECT_EQ(r.gpu[0].grid[2], 2u);
  EXPECT_EQ(r.gpu[0].bytes, 0u);
  EXPECT_EQ(r.world_size, -1);
  bool counted = false;
  for (const std::string& n : r.notes) counted |= n.find("3 events left out") != std::string::npos;
  EXPECT_TRUE(counted);

  auto message = [&](const std::string& head) {
    try {
      import_kineto(trace(head, good));
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(imported)");
  };
  EXPECT_EQ(message(R"("distributedInfo": {"rank": 0}, "baseTimeNanoseconds": 18446744073709551615,)"),
            "baseTimeNanoseconds 18446744073709551615 is not a time");
  EXPECT_EQ(message(R"("distributedInfo": {"rank": 0}, "baseTimeNanoseconds": -1,)"),
            "baseTimeNanoseconds -1 is not a time");
  EXPECT_EQ(message(R"("distributedInfo": {"rank": 1000000000000},)"), "distributedInfo.rank 1000000000000 is not a rank");
}

// Seen reviewing the importer for fuzz_nsys (tests/fuzz): a row time near the int64_t limit
// overflowed when the session start was added. Such rows are left out and counted, as is a session start that is no time.
TEST(ImportNsys, RowsWithImpossibleTimesAreLeftOutAndCounted) {
  laggard::testing::TempDir tmp;
  std::string file = (tmp.path / "rank0.sqlite").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);"
                         "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000);"
                         "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
                         "INSERT INTO StringIds VALUES (1, 'k'), (2, 'cudaLaunchKernel_v7000');"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, shortName);"
                         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 1, 1), "
                         "(9223372036854775000, 9223372036854775807, 2, 1), (300, 250, 3, 1);"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId);"
                         "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (-9223372036854775807, 90, 1, 1, 2);"
                         "CREATE TABLE NVTX_EVENTS (start, end, text, globalTid, eventType);"
                         "INSERT INTO NVTX_EVENTS VALUES (50, 9223372036854775807, 'step', 1, 59), (50, 400, 'ok', 1, 59);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ImportedRank r = import_nsys(file);
  ASSERT_EQ(r.gpu.size(), 1u);
  EXPECT_EQ(r.gpu[0].start_ns, 1700000000000000100);
  EXPECT_EQ(r.gpu[0].api_end_ns, 0);  // its launch row's start is no time
  ASSERT_EQ(r.ranges.size(), 1u);
  EXPECT_EQ(r.strings.at(r.ranges[0].name), "ok");
  bool counted = false;
  for (const std::string& n : r.notes) counted |= n.find("4 rows left out") != std::string::npos;
  EXPECT_TRUE(counted);
}

// Found by fuzz_nsys (tests/fuzz): a kernel name that is not UTF-8 (nsys stores bytes) made
// writing the rank file throw a JSON type_error out of `laggard import`, leaving a .tmp file.
TEST(ImportNsys, NamesThatAreNotUtf8AreWrittenWithReplacementCharacters) {
  laggard::testing::TempDir tmp;
  std::string file = (tmp.path / "rank0.sqlite").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
                         "INSERT INTO StringIds VALUES (1, CAST(X'6bff5f61' AS TEXT));"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, shortName);"
                         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 1, 1);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ImportedRank r = import_nsys(file);
  write_rank_file(r, (tmp.path / "run").string(), "utf8");
  RunModel m = read_run((tmp.path / "run").string());
  ASSERT_EQ(m.ranks.size(), 1u);
  ASSERT_EQ(m.ranks[0].windows.at(0).gpu.size(), 1u);
  EXPECT_EQ(m.strings.at(m.ranks[0].windows[0].gpu[0].name), "k\xEF\xBF\xBD_a");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path / "run"), fs::directory_iterator()), 1);
}

TEST(ImportNsys, RankFromFileName) {
  EXPECT_EQ(rank_from_file_name("/x/report-rank3.sqlite"), 3);
  EXPECT_EQ(rank_from_file_name("run_rank_12.sqlite"), 12);
  EXPECT_EQ(rank_from_file_name("RANK-7.nsys.sqlite"), 7);
  EXPECT_EQ(rank_from_file_name("profile.sqlite"), -1);
}

// A Kineto trace as PyTorch writes it: per step a ProfilerStep#N range, then per kernel its
// cudaLaunchKernel and the kernel (the shape of bench/import-kineto's generated traces).
std::string generated_trace(int steps, int kernels) {
  std::string t = R"x({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},)x"
                  "\n\"baseTimeNanoseconds\": 1711964646000000000, \"traceEvents\": [\n";
  int64_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const double ts = 1000.0 + 5000.0 * s;
    t += fmt::format(R"x({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 7, "tid": 7, )x"
                     R"x("ts": {:.3f}, "dur": 4900.0}},)x" "\n", s, ts);
    for (int k = 0; k < kernels; ++k, ++corr) {
      const double at = ts + 10.0 * k;
      t += fmt::format(R"x({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, )x"
                       R"x("ts": {:.3f}, "dur": 4.25, "args": {{"correlation": {}}}}},)x" "\n", at + 1.125, corr);
      t += fmt::format(R"x({{"ph": "X", "cat": "kernel", "name": "gemm_{}<float>(float const*)", "pid": 0, "tid": 7, )x"
                       R"x("ts": {:.3f}, "dur": 9.5, "args": {{"device": 0, "stream": 7, "correlation": {}, )x"
                       R"x("grid": [64, 1, 1], "block": [256, 1, 1]}}}},)x" "\n", k % 13, at + 6.0, corr);
    }
  }
  t += R"x({"ph": "i", "cat": "marker", "name": "end", "pid": 7, "tid": 7, "ts": 1.0}]})x";
  return t + "\n";
}

// Issue 24 item 9 / issue 29: a valid 290 MB trace imported into one 273 MB rank file that
// `laggard report` then refused (over --max-file-mb) and said "0 of -1 ranks". Import writes what
// report reads: frames in segments, none near the limit, every window read back. Scaled down
// here: 2 KiB segments and a 16 KiB limit stand for 32 MiB and 256 MiB.
TEST(ImportKineto, ALargeTraceImportsIntoSegmentsTheReportReadsWhole) {
  laggard::testing::TempDir tmp;
  const int steps = 60, kernels = 40;
  spit(tmp.path / "big.json", generated_trace(steps, kernels));
  ImportedRank r = import_kineto((tmp.path / "big.json").string());
  ASSERT_EQ(r.gpu.size(), size_t(steps * kernels));
  const std::string run = (tmp.path / "run").string();
  const std::vector<std::string> paths = write_rank_file(r, run, "run", 2048);
  ASSERT_GT(paths.size(), 3u);
  uint64_t total = 0;
  for (const std::string& p : paths) {
    EXPECT_EQ(fs::path(p).extension(), ".lgr");
    EXPECT_LT(fs::file_size(p), 16u << 10) << p;
    total += fs::file_size(p);
  }
  ReadOptions opts;
  opts.max_file_bytes = 16 << 10;
  ASSERT_GT(total, opts.max_file_bytes) << "the trace must be larger than one file may be";
  RunModel m = read_run(run, opts);
  for (const auto& p : m.problems) EXPECT_NE(p.kind, "unreadable_file") << p.message;
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].rank, 3);
  EXPECT_EQ(m.world_size, 8);
  EXPECT_EQ(m.ranks[0].files.size(), paths.size());
  size_t gpu = 0, steps_seen = 0;
  for (const auto& w : m.ranks[0].windows) {
    gpu += w.gpu.size();
    for (const auto& sec : w.sections) steps_seen += sec.name == "ProfilerStep" ? sec.count : 0;
    for (const auto& a : w.gpu) EXPECT_EQ(m.strings.at(a.api_name), "cudaLaunchKernel");
  }
  EXPECT_EQ(gpu, size_t(steps * kernels));
  EXPECT_EQ(steps_seen, size_t(steps));
  EXPECT_EQ(m.ranks[0].windows.size(), size_t(steps));  // one per step; the first step opens the trace
  // And the report command over it, at that limit: every rank read, not "0 of -1 ranks".
  laggard::cli::ReportOptions o;
  o.dir = run;
  o.format = "json";
  o.read.max_file_bytes = opts.max_file_bytes;
  std::ostringstream out, err;
  ASSERT_EQ(laggard::cli::report_command(o, out, err), 0) << err.str();
  const nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j.at("ranks").size(), 1u);
  EXPECT_EQ(j.at("ranks")[0].at("rank"), 3);
  EXPECT_EQ(j.at("ranks")[0].at("windows"), m.ranks[0].windows.size());
  EXPECT_EQ(out.str().find("unreadable_file"), std::string::npos);
}

// `laggard trace` on an imported run: every rank's kernels, copies and ranges on one timeline.
TEST(ImportKineto, TraceCommandWorksOnImportedRun) {
  REQUIRE_TRACE(kHta + "/trace_filter/sampled_rank-0.json.gz");
  laggard::testing::TempDir tmp;
  for (int rank : {0, 1})
    write_rank_file(import_kineto(kHta + "/trace_filter/sampled_rank-" + std::to_string(rank) + ".json.gz"),
                    (tmp.path / "run").string(), "run");
  laggard::cli::TraceOptions o;
  o.dir = (tmp.path / "run").string();
  o.output = (tmp.path / "trace.json").string();
  std::ostringstream err;
  ASSERT_EQ(laggard::cli::trace_command(o, err), 0) << err.str();
  auto j = nlohmann::json::parse(slurp(o.output));
  const auto& events = j.is_array() ? j : j.at("traceEvents");
  size_t kernels = 0, ranges = 0;
  for (const auto& e : events) {
    kernels += e.value("cat", "") == "kernel";
    ranges += e.value("cat", "") == "nvtx";
  }
  EXPECT_EQ(kernels, 1154u + 1104u - 20u);  // the 20 NCCL kernels have a category of their own
  EXPECT_EQ(ranges, 73u + 65u);
}

// The command: each bad input is named with its reason, the rest is imported; exit 1 when some
// input was skipped, 2 when nothing was imported.
TEST(ImportCommand, BadInputIsSkippedWithOneLineAndTheRestImported) {
  REQUIRE_TRACE(kHta + "/trace_file_list/inference_rank_1.json.gz");
  laggard::testing::TempDir tmp;
  spit(tmp.path / "not-kineto.json", R"({"hello": "world"})");
  laggard::cli::ImportOptions o;
  o.format = "kineto";
  o.inputs = {kHta + "/trace_file_list/inference_rank_1.json.gz", (tmp.path / "not-kineto.json").string()};
  o.out = (tmp.path / "run").string();
  std::ostringstream out, err;
  EXPECT_EQ(laggard::cli::import_command(o, out, err), 1);
  EXPECT_NE(err.str().find("not-kineto.json: not a Kineto trace"), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("rank 1 (distributedInfo.rank)"), std::string::npos) << out.str();
  EXPECT_EQ(read_run(o.out).ranks.size(), 1u);

  o.inputs = {(tmp.path / "not-kineto.json").string()};
  o.out = (tmp.path / "run2").string();
  EXPECT_EQ(laggard::cli::import_command(o, out, err), 2);
}

}  // namespace import_test
