// What the report prints and what its options mean (issue 10, items 9 and 10): names from files
// cannot drive the terminal, cuts cover every part of the report and say so, options that
// match nothing warn, scores near a threshold show the digits that decide.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "json_text.h"
#include "report_command.h"
#include "score_text.h"
#include "text_escape.h"

namespace laggard::report {
namespace report_output_test {

constexpr int64_t kS = 1'000'000'000;

// `steps` steps of 1 s per rank, one window per step; rank `slow` takes 2x in steps [from, to).
RunModel run(int ranks, int steps, int slow = -1, int from = 0, int to = 0, const std::string& host = "node") {
  RunModel m;
  m.run_id = "r";
  m.dir = "d";
  m.world_size = ranks;
  for (int r = 0; r < ranks; ++r) {
    RankData rd;
    rd.rank = r;
    rd.host = host + std::to_string(r);
    rd.flush_s = 1;
    rd.final = true;
    for (int k = 0; k < steps; ++k) {
      CaptureWindow w;
      w.index = k;
      w.start_ns = 100 * kS + k * kS;
      w.end_ns = w.start_ns + kS;
      SectionWindow step{.name = "step", .parent = "", .count = 1};
      SectionWindow part{.name = "part", .parent = "step", .count = 8};
      int64_t dur = (r == slow && k >= from && k < to) ? 200'000'000 : 100'000'000;
      step.occurrences.push_back({w.start_ns, 9 * dur, 1, 1.0});
      for (int i = 0; i < 8; ++i) part.occurrences.push_back({w.start_ns + i * dur, dur, 1, 1.0});
      for (SectionWindow* s : {&step, &part}) {
        for (const auto& o : s->occurrences) s->total_ns += o.dur_ns;
        s->min_ns = s->max_ns = s->median_ns = s->occurrences[0].dur_ns;
      }
      w.sections = {step, part};
      rd.windows.push_back(w);
    }
    m.ranks.push_back(rd);
  }
  return m;
}

struct Output {
  int rc;
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

Output report(RunModel m, cli::ReportOptions o) {
  std::ostringstream out, err;
  int rc = cli::report_model(m, o, out, err);
  return {rc, out.str(), err.str()};
}

cli::ReportOptions json_options() {
  cli::ReportOptions o;
  o.format = "json";
  return o;
}

std::set<int> straggler_ranks(const nlohmann::json& j) {
  std::set<int> out;
  for (const auto& s : j["stragglers"]) out.insert(s["rank"].get<int>());
  return out;
}

bool has_problem(const nlohmann::json& j, const std::string& kind) {
  for (const auto& p : j["problems"])
    if (p["kind"] == kind) return true;
  return false;
}

TEST(TextEscape, ControlCharactersBecomeVisible) {
  EXPECT_EQ(escape_text("fwd"), "fwd");
  EXPECT_EQ(escape_text("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(escape_text("x\ny\tz\r"), "x\\ny\\tz\\r");
  EXPECT_EQ(escape_text(std::string("n\0ul\x7f", 5)), "n\\x00ul\\x7f");
  EXPECT_EQ(escape_text("csi\xc2\x9b" "2J"), "csi\\u009b2J");   // C1 CSI in UTF-8
  EXPECT_EQ(escape_text("caf\xc3\xa9 \xe2\x86\x92"), "caf\xc3\xa9 \xe2\x86\x92");  // other UTF-8 untouched
}

TEST(TextEscape, NoControlCharacterFromAFileReachesTheTerminal) {
  RunModel m = run(4, 6, 1, 0, 6, "\x1b]0;owned\x07host");
  for (auto& r : m.ranks)
    for (auto& w : r.windows) w.sections[1].name = "bwd\x1b[2J\nFAKE REPORT LINE";
  m.problems.push_back({"unreadable_file", -1, "/tmp/x\x1b[31m", "bad\rline"});
  cli::ReportOptions o;
  Output text = report(m, o);
  ASSERT_EQ(text.rc, 0) << text.err;
  for (char c : text.out) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c);
  EXPECT_EQ(text.out.find("\nFAKE REPORT LINE"), std::string::npos);
  EXPECT_NE(text.out.find("bwd\\x1b[2J\\nFAKE REPORT LINE"), std::string::npos) << text.out;
  // JSON keeps the names exactly.
  Output json = report(m, json_options());
  EXPECT_NE(json.out.find("bwd\\u001b[2J\\nFAKE"), std::string::npos);
}

TEST(Cuts, StepsCutCoversStragglersAndTheVerdictToo) {
  RunModel m = run(4, 12, 2, 8, 12);  // rank 2 slow in steps 8-11 only
  Output all = report(m, json_options());
  EXPECT_EQ(straggler_ranks(all.json()), std::set<int>{2});
  cli::ReportOptions o = json_options();
  o.cut.steps = {{0, 5}};
  Output early = report(m, o);
  ASSERT_EQ(early.rc, 0) << early.err;
  nlohmann::json j = early.json();
  EXPECT_TRUE(straggler_ranks(j).empty()) << j["stragglers"].dump();
  EXPECT_EQ(j["steps"]["count"], 6);
  EXPECT_NE(j["cut"].get<std::string>().find("steps 0-5"), std::string::npos);
  o.cut.steps = {{8, 11}};
  EXPECT_EQ(straggler_ranks(report(m, o).json()), std::set<int>{2});
}

TEST(Cuts, TextSaysWhatTheCutCovers) {
  cli::ReportOptions o;
  o.cut.steps = {{2, 3}};
  o.cut.ranks = {0, 1, 2};
  Output text = report(run(4, 6), o);
  EXPECT_NE(text.out.find("laggard report: cut to ranks 0-2; steps 2-3 (each rank's own steps"), std::string::npos)
      << text.out;
}

TEST(Cuts, StepsBeyondTheRunWarn) {
  cli::ReportOptions o = json_options();
  o.cut.steps = {{20, 30}};
  Output r = report(run(2, 6), o);
  EXPECT_NE(r.err.find("warning: --steps 20:30 goes beyond the run, which has 6 step(s)"), std::string::npos) << r.err;
  EXPECT_TRUE(has_problem(r.json(), "steps_beyond_run"));
}

TEST(Cuts, StepSectionMatchingNothingWarns) {
  cli::ReportOptions o = json_options();
  o.analyses.step_section = "no-such-section";
  Output r = report(run(2, 6), o);
  EXPECT_NE(r.err.find("--step-section 'no-such-section' matches no NVTX section"), std::string::npos) << r.err;
  EXPECT_TRUE(has_problem(r.json(), "step_section_not_found"));
}

TEST(Cuts, RanksNotInTheRunWarn) {
  cli::ReportOptions o = json_options();
  o.cut.ranks = {1, 9};
  Output r = report(run(4, 6), o);
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.err.find("the run has no rank 9 (it has ranks 0-3)"), std::string::npos) << r.err;
  o.cut.ranks = {9};
  EXPECT_EQ(report(run(4, 6), o).rc, 2);
}

TEST(ScoreText, ShowsTheDigitsThatDecide) {
  EXPECT_EQ(score_text(0.5, 0.75), "0.50");
  EXPECT_EQ(score_text(0.7499, 0.75), "0.7499");
  EXPECT_EQ(score_text(0.74999, 0.75), "0.74999");
  EXPECT_EQ(score_text(0.75, 0.75), "0.75");
  EXPECT_EQ(score_text(0.7501, 0.75), "0.75");  // at or above: 0.75 is on the right side
}

}  // namespace
}  // namespace laggard::report
