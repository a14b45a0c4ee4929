// The text report at 10,000 ranks (issue 14: it was 986 KB): every table bounded by --top,
// hosts and communicator members summarised as rank ranges and counts, the verdict first, and
// a named straggler still shown.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "report_command.h"
#include "synthetic_run.h"
#include "text_lists.h"

namespace laggard::report {
namespace report_scale_text_test {

std::string text_report(const synth::Spec& spec, size_t top = 5) {
  RunModel m = synth::make_run(spec);
  cli::ReportOptions o;
  o.top = top;
  std::ostringstream out, err;
  EXPECT_EQ(cli::report_model(m, o, out, err), 0) << err.str();
  return out.str();
}

size_t longest_line(const std::string& text) {
  size_t longest = 0, start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    longest = std::max(longest, nl - start);
  return longest;
}

TEST(RankLists, RangesAndCounts) {
  EXPECT_EQ(rank_ranges({}), "");
  EXPECT_EQ(rank_ranges({7, 0, 1, 2, 3, 5, 8, 3}), "0-3,5,7-8");
  EXPECT_EQ(rank_ranges({-1, 4}), "?,4");
  std::vector<int> most;
  for (int r = 0; r < 960; ++r)
    if (r != 512) most.push_back(r);
  EXPECT_EQ(counted_ranks(most), "959 ranks: 0-511,513-959");
  std::vector<int> even;
  for (int r = 0; r < 10'000; r += 2) even.push_back(r);
  std::string s = rank_ranges(even, 40);
  EXPECT_LE(s.size(), 40u + 20u) << s;
  EXPECT_NE(s.find(",... (+"), std::string::npos) << s;
  EXPECT_NE(s.find(" more)"), std::string::npos) << s;
}

TEST(RankLists, RowsShown) {
  EXPECT_EQ(rows_shown(16, 5), 16u);  // small jobs: every row
  EXPECT_EQ(rows_shown(17, 5), 5u);
  EXPECT_EQ(rows_shown(10'000, 40), 40u);
  EXPECT_EQ(more_line(10, 10, "ranks"), "");
}

// 10,000 ranks on 1,250 hosts, one slow GPU. Bound: 30 KB. With --top 5, each table shows at
// most 5 rows (~100 bytes each) and every rank list is cut at 160 characters; the ~20 tables
// and their headings are about 15 KB at any rank count (the 100-rank report is the same size),
// where listing every rank took 986 KB.
TEST(ScaleText, TenThousandRanksStayReadable) {
  synth::Spec spec;
  spec.ranks = 10'000;
  spec.ranks_per_host = 8;
  spec.steps = 4;
  spec.faults = {{synth::Fault::Kind::slow_gpu, 4242, 1.6, 0, "backward"}};
  const std::string text = text_report(spec);
  EXPECT_LT(text.size(), 30'000u) << text;
  EXPECT_LT(longest_line(text), 800u) << text;  // the longest: a verdict sentence; no list of 10,000 ranks
  std::cerr << "text report of 10,000 ranks: " << text.size() << " bytes\n";
  // The verdict first: right after the header and the problems, naming the slow rank.
  const size_t verdict = text.find("\nVerdict:");
  ASSERT_NE(verdict, std::string::npos) << text;
  EXPECT_LT(verdict, 1'000u) << text;
  EXPECT_LT(verdict, text.find("\nStragglers"));
  EXPECT_NE(text.find("1. [gpu_compute] rank 4242 "), std::string::npos) << text;
  // The straggler table and the GPU table still show it by number.
  const std::string stragglers = text.substr(text.find("\nStragglers"), 600);
  EXPECT_NE(stragglers.find(" 4242  node530 "), std::string::npos) << stragglers;
  const size_t gpu = text.find("\nGPU (CUPTI");
  ASSERT_NE(gpu, std::string::npos);
  EXPECT_NE(text.find(" 4242  node530 ", gpu), std::string::npos) << text.substr(gpu, 1500);
  // The communicator's 10,000 members as a range with a count, not 10,000 numbers.
  EXPECT_NE(text.find("10000 ranks: 0-9999"), std::string::npos) << text;

  // The size does not grow with the ranks.
  spec.ranks = 100;
  spec.faults[0].rank = 42;
  const std::string small = text_report(spec);
  EXPECT_LT(text.size(), small.size() * 3 / 2) << small.size() << " bytes at 100 ranks, " << text.size() << " at 10,000";
}

TEST(ScaleText, TopBoundsEveryTable) {
  synth::Spec spec;
  spec.ranks = 64;
  spec.steps = 4;
  const std::string top3 = text_report(spec, 3), top40 = text_report(spec, 40);
  // Each per-rank table (ranks, GPU, jitter, breakdown, NCCL) grows by 37 rows with --top 40.
  EXPECT_GT(top40.size(), top3.size() + 5 * 37 * 40) << top3;
  EXPECT_NE(top3.find("... 61 more ranks (--top shows more"), std::string::npos) << top3;
}

TEST(ScaleText, ProblemsOfOneKindAreSummarised) {
  synth::Spec spec;
  spec.ranks = 8;
  spec.steps = 4;
  RunModel m = synth::make_run(spec);
  for (int r = 100; r < 1100; ++r) m.problems.push_back({"incomplete_rank", r, "", "rank died early"});
  m.problems.push_back({"unreadable_file", -1, "/x", "bad"});
  cli::ReportOptions o;
  std::ostringstream out, err;
  ASSERT_EQ(cli::report_model(m, o, out, err), 0) << err.str();
  const std::string text = out.str();
  const std::string problems = text.substr(0, text.find("\nVerdict"));
  EXPECT_NE(problems.find("  [incomplete_rank] ... 995 more, 995 ranks: 105-1099\n"), std::string::npos) << problems;
  EXPECT_NE(problems.find("  [unreadable_file] bad: /x\n"), std::string::npos) << problems;
  EXPECT_LT(problems.size(), 1'000u) << problems;
}

}  // namespace
}  // namespace laggard::report
