// `laggard stacks`: grouping ranks and naming the ones behind, from hang reports built here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dir_listing.h"
#include "stacks.h"

namespace laggard::report {
namespace stacks_test {

RankHang rank_at(int rank, std::vector<std::string> sections, std::vector<std::string> symbols) {
  RankHang r;
  r.rank = rank;
  r.world_size = 8;
  HangThread t;
  t.tid = 100 + rank;
  t.main = true;
  t.status = "captured";
  t.sections = std::move(sections);
  t.frames.push_back({0x1000, 0, 0, "/lib/x86_64-linux-gnu/libc.so.6", "__futex_abstimed_wait", "", 0});
  for (const std::string& s : symbols) t.frames.push_back({0x2000, 0, 0, "/app/train", s, "", 0});
  r.threads.push_back(t);
  return r;
}

HangCollective allreduce(uint64_t seq) {
  HangCollective c;
  c.comm = "00000000000000aa";
  c.func = "AllReduce";
  c.seq = seq;
  return c;
}

TEST(Stacks, MinorityAtAnotherPlaceIsBehind) {
  HangSet set;
  for (int rank : {0, 2, 3, 4, 5, 6, 7})
    set.ranks.push_back(rank_at(rank, {"step", "allreduce"}, {"wait_for_peers(int)", "main"}));
  set.ranks.push_back(rank_at(1, {"step", "data_load"}, {"(anonymous namespace)::load_batch(double)", "train_step()", "main"}));
  set.world_size = 8;
  HangAnalysis a = analyze_hangs(set);
  ASSERT_EQ(a.groups.size(), 2u);
  EXPECT_EQ(a.behind, std::vector<int>{1});
  EXPECT_EQ(a.groups[0].sentence, "ranks 0, 2\u20137 wait in section allreduce, in wait_for_peers() \u2190 main()");
  EXPECT_EQ(a.groups[1].sentence,
            "rank 1 is still in section data_load, in load_batch() \u2190 train_step() \u2190 main()");
  EXPECT_TRUE(a.missing.empty());
}

TEST(Stacks, CollectiveSequenceDecidesWhoIsBehind) {
  HangSet set;
  for (int rank = 0; rank < 4; ++rank) {
    RankHang r = rank_at(rank, {"allreduce"}, {"ncclAllReduce"});
    r.nccl_active = true;
    r.last_started = allreduce(rank == 2 ? 1411 : 1412);
    if (rank != 2) r.in_flight.push_back(allreduce(1412));
    set.ranks.push_back(r);
  }
  // Rank 2 stands in the same function but has not started seq 1412.
  HangAnalysis a = analyze_hangs(set);
  EXPECT_EQ(a.behind, std::vector<int>{2});
  EXPECT_NE(a.summary.find("ranks 0\u20131, 3 wait in AllReduce seq 1412 (section allreduce)"), std::string::npos)
      << a.summary;
}

TEST(Stacks, EqualGroupsNameNobodyAndMissingRanksAreListed) {
  HangSet set;
  set.ranks.push_back(rank_at(0, {"a"}, {"f"}));
  set.ranks.push_back(rank_at(1, {"b"}, {"g"}));
  set.world_size = 4;
  HangAnalysis a = analyze_hangs(set);
  EXPECT_TRUE(a.behind.empty());
  EXPECT_EQ(a.missing, (std::vector<int>{2, 3}));
  EXPECT_NE(a.summary.find("no hang report from ranks 2\u20133"), std::string::npos);
}

TEST(Stacks, FormatsRankLists) {
  EXPECT_EQ(format_ranks({7, 0, 2, 3, 4, 5, 6}), "0, 2\u20137");
  EXPECT_EQ(format_ranks({1}), "1");
  EXPECT_EQ(format_ranks({}), "");
}

TEST(Stacks, RejectsFilesThatAreNotHangReports) {
  EXPECT_THROW(parse_hang_report(nlohmann::json{{"schema", "laggard-rank"}}, "x"), std::runtime_error);
  EXPECT_THROW(parse_hang_report(nlohmann::json::array(), "x"), std::runtime_error);
  RankHang r = parse_hang_report(nlohmann::json{{"schema", "laggard-hang"}, {"rank", 5}}, "x");
  EXPECT_EQ(r.rank, 5);
}

// Only regular files named hang-*.json, a link to one included (as directory_entry's
// is_regular_file follows links), among a run directory's rank files; sorted.
TEST(Stacks, FindsHangReportsByNameAmongTheRankFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laggard-stacks-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "hang-3-dir.json");
  auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "{}"; };
  for (int r = 0; r < 300; ++r) touch("rank" + std::to_string(r) + "-1-seg0000.lgr");
  for (const char* name : {"hang-2-100.json", "hang-1-100.json", "hang-1.txt", "xhang-4.json", "hang-5.json.bak", "hang-.json"})
    touch(name);
  fs::create_symlink(dir / "hang-1-100.json", dir / "hang-6-link.json");
  fs::create_symlink(dir / "missing", dir / "hang-7-dangling.json");
  const std::vector<std::string> want = {(dir / "hang-.json").string(), (dir / "hang-1-100.json").string(),
                                         (dir / "hang-2-100.json").string(), (dir / "hang-6-link.json").string()};
  EXPECT_EQ(find_hang_reports(dir.string()), want);
  // The report's one listing of the run directory finds the same, and its rank files.
  const RunDirFiles listed = run_dir_files(dir.string());
  EXPECT_EQ(listed.hang_reports, want);
  EXPECT_EQ(listed.ranks, rank_files_in(dir.string()));
  EXPECT_EQ(listed.ranks.size(), 300u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace laggard::report
