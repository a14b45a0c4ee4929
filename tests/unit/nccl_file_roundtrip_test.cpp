// The "nccl" window object (schema version 3): what capture writes is what the report reads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "file_builders.h"
#include "temp_dir.h"
#include "reader.h"
#include "reader_checks.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace nccl_file_roundtrip_test {

using laggard::testing::TempDir;

laggard::FileInfo info(int rank) {
  laggard::FileInfo fi = laggard::testing::file_info("run1", rank, 2, 100 + rank);
  fi.process_start_ns = 1'000'000'000;
  fi.nccl_status = "on";
  return fi;
}

constexpr int64_t kWindowStart = 1'700'000'000'000'000'000;

laggard::WindowSnapshot window_with_ops(uint64_t gpu_base) {
  laggard::WindowSnapshot w = laggard::testing::window_at(0, kWindowStart);
  laggard::NcclWindow& n = w.nccl;
  n.active = true;
  n.comms.push_back({0x1234abcdull, "dp \"group\"", 2, 1, 2});
  n.comms.push_back({0xffull, "", 4, 3, 1});
  n.strings = {"AllReduce", "ncclFloat32", "RING", "SIMPLE", "Send"};
  laggard::NcclOp c;
  c.comm = 0;
  c.func = 0;
  c.datatype = 1;
  c.algo = 2;
  c.proto = 3;
  c.seq = 41;
  c.count = 256;
  c.bytes = 1024;
  c.nchannels = 2;
  c.channels = 2;
  c.upload_start_ns = kWindowStart - 5000;  // enqueued in the previous window
  c.upload_end_ns = kWindowStart + 1000;
  c.gpu_start = gpu_base + 20'000;
  c.gpu_end = gpu_base + 70'000;
  n.ops.push_back(c);
  laggard::NcclOp p;
  p.comm = 1;
  p.p2p = true;
  p.func = 4;
  p.datatype = 1;
  p.peer = 2;
  p.count = 8;
  p.bytes = 32;
  p.upload_start_ns = kWindowStart + 100;
  p.upload_end_ns = 0;  // unknown
  n.ops.push_back(p);  // no GPU times
  n.dropped.pool_full = 3;
  n.dropped.no_gpu_time = 1;
  // Version 4.
  n.table_version = 5;
  n.inits = 2;
  n.kernel_events = "on";
  n.ops[0].chan_host_start_ns = kWindowStart + 25'000;
  n.ops[0].chan_host_stop_ns = kWindowStart + 80'000;
  n.p2p.push_back({1, 7, 5, 700, 500});
  return w;
}

TEST(NcclFile, OpsCommunicatorsAndDropsRoundTrip) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::SegmentWriter writer(run_dir, info(1), 30);
  laggard::WindowSnapshot w = window_with_ops(static_cast<uint64_t>(kWindowStart));
  ASSERT_EQ(writer.write(w, {}, true, 0), "");

  std::ifstream in(writer.current_path());
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema_version"], laggard::kSchemaVersion);
  EXPECT_EQ(j["capture"]["nccl"], "on");
  const auto& nccl = j["windows"][0]["nccl"];
  EXPECT_EQ(nccl["gpu_clock"], "globaltimer");
  EXPECT_EQ(nccl["comms"][0]["id"], "000000001234abcd");
  EXPECT_TRUE(nccl["comms"][1]["name"].is_null());
  EXPECT_EQ(nccl["ops"]["gpu_start_offset_ns"][0], 20'000);
  EXPECT_TRUE(nccl["ops"]["gpu_dur_ns"][1].is_null());
  EXPECT_EQ(nccl["ops"]["algo"][1], -1);
  EXPECT_EQ(nccl["dropped"]["pool_full"], 3);
  EXPECT_EQ(nccl["plugin"]["table"], 5);
  EXPECT_EQ(nccl["plugin"]["kernel_events"], "on");
  EXPECT_EQ(nccl["ops"]["chan_host_stop_offset_ns"][0], 80'000);
  EXPECT_TRUE(nccl["ops"]["chan_host_start_offset_ns"][1].is_null());

  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  const auto& ops = m.ranks[0].windows.at(0).collectives;
  ASSERT_EQ(ops.size(), 2u);
  const auto& c = ops[0];
  EXPECT_EQ(c.chan_host_start_ns, kWindowStart + 25'000);
  EXPECT_EQ(c.chan_host_stop_ns, kWindowStart + 80'000);
  EXPECT_EQ(c.channels, 2);
  EXPECT_EQ(m.ranks[0].nccl_status, "on");
  const auto& win = m.ranks[0].windows.at(0);
  EXPECT_EQ(win.nccl_table, 5);
  EXPECT_EQ(win.nccl_kernel_events, "on");
  ASSERT_EQ(win.p2p.size(), 1u);
  EXPECT_EQ(m.strings.at(win.p2p[0].comm), "00000000000000ff");
  EXPECT_EQ(win.p2p[0].sends, 7u);
  EXPECT_EQ(win.p2p[0].recv_bytes, 500u);
  EXPECT_EQ(m.strings.at(c.comm), "000000001234abcd");
  EXPECT_EQ(m.strings.at(c.comm_name), "dp \"group\"");
  EXPECT_EQ(c.comm_nranks, 2);
  EXPECT_EQ(c.comm_rank, 1);
  EXPECT_EQ(c.comm_nnodes, 2);
  EXPECT_EQ(m.strings.at(c.func), "AllReduce");
  EXPECT_EQ(m.strings.at(c.datatype), "ncclFloat32");
  EXPECT_EQ(m.strings.at(c.algo), "RING");
  EXPECT_EQ(m.strings.at(c.proto), "SIMPLE");
  EXPECT_FALSE(c.p2p);
  EXPECT_EQ(c.seq, 41u);
  EXPECT_EQ(c.count, 256u);
  EXPECT_EQ(c.bytes, 1024u);
  EXPECT_EQ(c.root, -1);
  EXPECT_EQ(c.nchannels, 2);
  EXPECT_EQ(c.upload_start_ns, kWindowStart - 5000);
  EXPECT_EQ(c.upload_end_ns, kWindowStart + 1000);
  EXPECT_EQ(c.gpu_start_ns, kWindowStart + 20'000);
  EXPECT_EQ(c.gpu_end_ns, kWindowStart + 70'000);
  const auto& p = ops[1];
  EXPECT_TRUE(p.p2p);
  EXPECT_EQ(m.strings.at(p.func), "Send");
  EXPECT_EQ(p.peer, 2);
  EXPECT_EQ(p.comm_name, laggard::report::StringTable::kNone);
  EXPECT_EQ(p.algo, laggard::report::StringTable::kNone);
  EXPECT_EQ(p.upload_end_ns, 0);
  EXPECT_EQ(p.gpu_start_ns, 0);
  EXPECT_EQ(p.gpu_end_ns, 0);
  EXPECT_EQ(m.ranks[0].windows[0].dropped.at("nccl_pool_full"), 3u);
  bool dropped = false, no_gpu = false;
  for (const auto& pr : m.problems) {
    dropped |= pr.kind == "nccl_dropped" && pr.rank == 1;
    no_gpu |= pr.kind == "nccl_no_gpu_time" && pr.rank == 1;
  }
  EXPECT_TRUE(dropped);
  EXPECT_TRUE(no_gpu);
}

// Found by tests/fuzz/fuzz_nccl: NCCL's strings and commName are bytes as given; invalid UTF-8
// made the whole rank file invalid JSON.
TEST(NcclFile, InvalidUtf8InNcclStringsKeepsTheFileValid) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::SegmentWriter writer(run_dir, info(0), 30);
  laggard::WindowSnapshot w = window_with_ops(static_cast<uint64_t>(kWindowStart));
  w.nccl.comms[0].name = "dp\xde\xad";
  w.nccl.strings[0] = "All\xbe\xefReduce";
  ASSERT_EQ(writer.write(w, {}, true, 0), "");
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  for (const auto& p : m.problems) EXPECT_NE(p.kind, "unreadable_file") << p.message;
  EXPECT_EQ(m.ranks[0].windows.at(0).collectives.size(), 2u);
}

TEST(NcclFile, GpuClockThatIsNotEpochBasedIsMappedOntoTheHostClock) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::SegmentWriter writer(run_dir, info(0), 30);
  // A GPU clock counting from boot: 1000 s.
  laggard::WindowSnapshot w = window_with_ops(1'000'000'000'000ull);
  ASSERT_EQ(writer.write(w, {}, true, 0), "");
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  const auto& c = m.ranks[0].windows.at(0).collectives.at(0);
  EXPECT_EQ(c.gpu_end_ns, c.chan_host_stop_ns);  // ends no later than the callback that reported it
  EXPECT_EQ(c.gpu_end_ns - c.gpu_start_ns, 50'000);
  EXPECT_EQ(m.ranks[0].nccl_gpu_shift_ns, c.gpu_start_ns - (1'000'000'000'000 + 20'000));
  bool noted = false;
  for (const auto& pr : m.problems) noted |= pr.kind == "nccl_gpu_clock";
  EXPECT_TRUE(noted);
}

TEST(NcclFile, WindowsWithoutNcclHaveNoObjectAndReadersOfVersion1StillWork) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::SegmentWriter writer(run_dir, info(0), 30);
  laggard::WindowSnapshot w;
  w.start_ns = kWindowStart;
  w.end_ns = kWindowStart + 1;
  ASSERT_EQ(writer.write(w, {}, true, 0), "");
  std::ifstream in(writer.current_path());
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_FALSE(j["windows"][0].contains("nccl"));
  // A version-1 file (no nccl anywhere) is read as before.
  j["schema_version"] = 1;
  std::ofstream(writer.current_path()) << j.dump();
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_TRUE(m.ranks[0].windows[0].collectives.empty());
}

TEST(NcclFile, MalformedOpsLeaveOutTheWindowNotTheReport) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::SegmentWriter writer(run_dir, info(0), 30);
  ASSERT_EQ(writer.write(window_with_ops(static_cast<uint64_t>(kWindowStart)), {}, true, 0), "");
  std::ifstream in(writer.current_path());
  nlohmann::json j = nlohmann::json::parse(in);
  j["windows"][0]["nccl"]["ops"]["seq"] = nlohmann::json::array({1});  // one entry short
  std::ofstream(writer.current_path()) << j.dump();
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_FALSE(m.problems.empty());
  EXPECT_EQ(m.problems[0].kind, "invalid_value");  // the window is left out, not the rank
  EXPECT_EQ(m.ranks.size(), 1u);
  EXPECT_NE(m.problems[0].message.find("nccl.ops.seq"), std::string::npos) << m.problems[0].message;
}

// Operations naming a communicator larger than the run (or a rank outside it) are left out, and
// each rank that had them is said once, in rank order, whichever thread checked it.
TEST(NcclFile, CommunicatorsLargerThanTheRunAreLeftOutRankByRank) {
  using namespace laggard::report;
  RunModel m;
  for (int rank = 0; rank < 300; ++rank) {
    RankData r;
    r.rank = rank;
    for (int w = 0; w < 2; ++w) {
      CaptureWindow cw;
      for (int k = 0; k < 5; ++k) {
        Collective c;
        c.comm_nranks = 300;
        c.comm_rank = rank;
        if (rank % 7 == 3 && k == w) c.comm_nranks = 5000;             // larger than the run's 1024
        if (rank % 11 == 5 && k == 4) c.comm_rank = c.comm_nranks;     // outside its communicator
        cw.collectives.push_back(c);
      }
      r.windows.push_back(cw);
    }
    m.ranks.push_back(r);
  }
  check_comm_sizes(m, 1024);
  std::vector<int> said;
  for (const Problem& p : m.problems) {
    EXPECT_EQ(p.kind, "invalid_value");
    said.push_back(p.rank);
  }
  std::vector<int> expected;
  for (int rank = 0; rank < 300; ++rank) {
    const bool large = rank % 7 == 3, outside = rank % 11 == 5;
    if (large || outside) expected.push_back(rank);
    size_t left = 0;
    for (const CaptureWindow& cw : m.ranks[rank].windows) left += cw.collectives.size();
    EXPECT_EQ(left, 10u - (large ? 2 : 0) - (outside ? 2 : 0)) << rank;
  }
  EXPECT_EQ(said, expected);
  ASSERT_FALSE(m.problems.empty());
  EXPECT_NE(m.problems[0].message.find("rank 3: 2 NCCL operations name a communicator of 5000 ranks"), std::string::npos)
      << m.problems[0].message;
}

}  // namespace
