// Outputs for people who continue elsewhere (issue 15) and score digits (issue 10):
// `report --format csv` (one file per table, pandas-readable, formula injection guarded),
// `laggard trace` (CPU launch -> GPU kernel arrows as Kineto writes them, a row per NCCL
// communicator, --steps bounding the size), and scores near a threshold shown with the digits
// that decide in the GPU table and the verdict.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "render_csv.h"
#include "render_gpu.h"
#include "report_command.h"
#include "synthetic_run.h"
#include "temp_dir.h"

namespace laggard::report {
namespace render_outputs_test {

using nlohmann::json;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// ---- CSV ----------------------------------------------------------------------------------

TEST(Csv, CellsAreQuotedAsRfc4180Says) {
  EXPECT_EQ(csv_text("forward"), "forward");
  EXPECT_EQ(csv_text("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_text("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_text("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_text(""), "");
  EXPECT_EQ(csv_number(0.25), "0.25");
  EXPECT_EQ(csv_number(-3), "-3");  // numbers are not text: no guard
  EXPECT_EQ(csv_number(std::nan("")), "");
}

TEST(Csv, FormulaInjectionIsGuardedAsOwaspSays) {
  EXPECT_EQ(csv_text("=HYPERLINK(\"http://x\")"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(csv_text("+1"), "'+1");
  EXPECT_EQ(csv_text("-2+3"), "'-2+3");
  EXPECT_EQ(csv_text("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(csv_text("\tx"), "'\tx");
  EXPECT_EQ(csv_text("\rx"), "\"'\rx\"");
  EXPECT_EQ(csv_text("a=b"), "a=b");  // only a leading character starts a formula
}

synth::Spec small_spec() {
  synth::Spec spec;
  spec.ranks = 4;
  spec.steps = 6;
  spec.faults = {{synth::Fault::Kind::slow_gpu, 2, 1.8, 0, "backward"}};
  return spec;
}

// A run whose names try everything: a comma and quotes in a section, a formula as a host.
RunModel hostile_run() {
  RunModel m = synth::make_run(small_spec());
  for (RankData& r : m.ranks) {
    r.host = "=cmd|' /C calc'!A0";
    for (CaptureWindow& w : r.windows)
      for (SectionWindow& s : w.sections)
        if (s.name == "backward") s.name = "back,\"ward\"\nx";
        else if (s.parent == "backward") s.parent = "back,\"ward\"\nx";
  }
  return m;
}

TEST(Csv, EveryTableIsWrittenAndReadsBack) {
  testing::TempDir dir("laggard-csv");
  RunModel m = hostile_run();
  cli::ReportOptions o;
  o.format = "csv";
  o.output = (dir.path / "tables").string();
  std::ostringstream out, err;
  ASSERT_EQ(cli::report_model(m, o, out, err), 0) << err.str();
  EXPECT_TRUE(out.str().empty());
  for (const char* t : {"run", "problems", "findings", "stragglers", "sections", "rank_sections", "window_scores",
                        "gpu_ranks", "gpu_rank_sections", "comm_ranks", "jitter_steps", "jitter_ranks",
                        "breakdown_ranks"})
    EXPECT_TRUE(std::filesystem::exists(dir.path / "tables" / (std::string(t) + ".csv"))) << t;
  std::string ranks = slurp(dir.path / "tables" / "rank_sections.csv");
  EXPECT_EQ(ranks.substr(0, ranks.find('\n')),
            "rank,host,section,count,samples,median_ms,share,relative_score,individual_score");
  EXPECT_NE(ranks.find(",'=cmd|' /C calc'!A0,"), std::string::npos) << ranks;  // guarded; no comma: not quoted
  EXPECT_NE(ranks.find("\"back,\"\"ward\"\"\nx\""), std::string::npos);
  // The slow rank is a straggler in the GPU table.
  std::string gpu = slurp(dir.path / "tables" / "stragglers.csv");
  EXPECT_NE(gpu.find("\n2,"), std::string::npos) << gpu;

  // pandas (Debian's python3-pandas) when installed, else Python's csv module: every file reads
  // with its header, the hostile names come back as text with the guard quote.
  // Debian's interpreter first: python3-pandas is installed for it, whatever `python3` is on PATH.
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string script = std::string(LAGGARD_SOURCE_DIR) + "/tests/unit/read_csv_tables.py";
  const std::string cmd = python + " " + script + " " + (dir.path / "tables").string() + " > " +
                          (dir.path / "py.out").string() + " 2>&1";
  if (std::system((python + " -c pass 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "python3 not installed";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << slurp(dir.path / "py.out");
  std::cout << slurp(dir.path / "py.out");
}

TEST(Csv, TheRunTableSaysWhatTheOtherTablesCover) {
  testing::TempDir dir("laggard-csv-cut");
  cli::ReportOptions o;
  o.format = "csv";
  o.output = (dir.path / "whole").string();
  std::ostringstream out, err;
  RunModel whole = synth::make_run(small_spec());
  ASSERT_EQ(cli::report_model(whole, o, out, err), 0) << err.str();
  std::string run = slurp(dir.path / "whole" / "run.csv");
  EXPECT_EQ(run.substr(0, run.find('\n')), "key,value");
  EXPECT_NE(run.find("\ncut,\n"), std::string::npos) << run;  // no cut: an empty cell

  o.output = (dir.path / "cut").string();
  o.cut.ranks = {0, 1};
  o.cut.steps = {{2, 3}};
  RunModel cut = synth::make_run(small_spec());
  ASSERT_EQ(cli::report_model(cut, o, out, err), 0) << err.str();
  run = slurp(dir.path / "cut" / "run.csv");
  EXPECT_NE(run.find("\nranks,2\n"), std::string::npos) << run;
  const size_t at = run.find("\ncut,");
  ASSERT_NE(at, std::string::npos) << run;
  const std::string cut_cell = run.substr(at + 5, run.find('\n', at + 1) - at - 5);
  EXPECT_NE(cut_cell.find("2"), std::string::npos) << run;  // the steps, as describe_cut says them
  EXPECT_FALSE(cut_cell.empty()) << run;
}

TEST(Csv, NeedsADirectory) {
  RunModel m = synth::make_run(small_spec());
  cli::ReportOptions o;
  o.format = "csv";
  std::ostringstream out, err;
  EXPECT_EQ(cli::report_model(m, o, out, err), 2);
  EXPECT_NE(err.str().find("-o DIR"), std::string::npos) << err.str();
}

// ---- trace --------------------------------------------------------------------------------

json trace(RunModel m, cli::TraceOptions o, int* rc = nullptr) {
  testing::TempDir dir("laggard-trace");
  o.output = (dir.path / "t.json").string();
  std::ostringstream err;
  int code = cli::trace_model(m, o, err);
  if (rc) *rc = code;
  if (code != 0) return json();
  return json::parse(slurp(o.output));
}

TEST(Trace, EveryKernelHasAnArrowFromItsLaunchAsKinetoDrawsIt) {
  synth::Spec spec = small_spec();
  RunModel m = synth::make_run(spec);
  json j = trace(m, {});
  ASSERT_TRUE(j.is_object());
  std::map<uint64_t, json> starts, ends;
  // X slices by (pid, tid): launch calls and GPU activities the arrows must bind to.
  std::map<std::pair<int, int64_t>, std::vector<std::pair<double, double>>> slices;
  size_t gpu_work = 0;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      slices[{e["pid"].get<int>(), e["tid"].get<int64_t>()}].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      const std::string cat = e["cat"];
      if (cat == "kernel" || cat == "memcpy" || cat == "memset" || cat == "nccl_kernel") ++gpu_work;
    }
    if (e["ph"] == "s") { EXPECT_TRUE(starts.emplace(e["id"].get<uint64_t>(), e).second) << "duplicate id"; }
    if (e["ph"] == "f") { EXPECT_TRUE(ends.emplace(e["id"].get<uint64_t>(), e).second) << "duplicate id"; }
  }
  EXPECT_EQ(starts.size(), gpu_work);  // every GPU activity of the synthetic run has its launch
  ASSERT_EQ(starts.size(), ends.size());
  auto encloses = [&](const json& e) {
    for (auto [from, to] : slices[{e["pid"].get<int>(), e["tid"].get<int64_t>()}])
      if (from <= e["ts"].get<double>() && e["ts"].get<double>() <= to) return true;
    return false;
  };
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(ends.count(id)) << id;
    const json& f = ends[id];
    // Kineto's form: cat and name "ac2g"; the end binds to the enclosing slice ("bp": "e").
    EXPECT_EQ(s["cat"], "ac2g");
    EXPECT_EQ(s["name"], "ac2g");
    EXPECT_FALSE(s.contains("bp"));
    EXPECT_EQ(f["cat"], "ac2g");
    EXPECT_EQ(f["bp"], "e");
    EXPECT_EQ(s["pid"], f["pid"]);  // one rank
    EXPECT_LT(s["tid"].get<int64_t>(), 1'000'000'000);   // a host thread
    EXPECT_GE(f["tid"].get<int64_t>(), 1'000'000'000);   // a GPU stream row
    EXPECT_LE(s["ts"].get<double>(), f["ts"].get<double>());
    EXPECT_TRUE(encloses(s)) << s.dump();
    EXPECT_TRUE(encloses(f)) << f.dump();
  }
}

TEST(Trace, EachCommunicatorHasItsOwnRow) {
  RunModel m = synth::make_run(small_spec());
  const uint32_t other = m.strings.intern("0xbeef"), name = m.strings.intern("tp");
  for (RankData& r : m.ranks)  // every other collective on a second, named communicator
    for (CaptureWindow& w : r.windows)
      for (size_t i = 0; i < w.collectives.size(); i += 2) {
        w.collectives[i].comm = other;
        w.collectives[i].comm_name = name;
      }
  json j = trace(m, {});
  std::map<int64_t, std::string> rows;
  std::map<int64_t, int> collectives;
  for (const json& e : j["traceEvents"]) {
    if (e["pid"] != 0) continue;
    if (e["name"] == "thread_name") rows[e["tid"].get<int64_t>()] = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] == "nccl") ++collectives[e["tid"].get<int64_t>()];
  }
  ASSERT_EQ(collectives.size(), 2u);
  std::set<std::string> names;
  for (const auto& [tid, n] : collectives) names.insert(rows[tid]);
  EXPECT_EQ(names, (std::set<std::string>{"NCCL (0xc0ffee)", "NCCL tp (0xbeef)"}));
}

TEST(Trace, StepsBoundTheEvents) {
  synth::Spec spec = small_spec();
  spec.steps = 12;
  RunModel m = synth::make_run(spec);
  json all = trace(m, {});
  cli::TraceOptions o;
  o.cut.steps = {{3, 4}};
  json two = trace(m, o);
  auto count = [](const json& j, const char* cat) {
    size_t n = 0;
    for (const json& e : j["traceEvents"])
      if (e["ph"] == "X" && e["cat"] == cat) ++n;
    return n;
  };
  // 2 of 12 steps: a sixth of the kernels and collectives.
  EXPECT_EQ(count(two, "kernel") * 6, count(all, "kernel"));
  EXPECT_EQ(count(two, "nccl") * 6, count(all, "nccl"));
  EXPECT_LT(two["traceEvents"].size() * 4, all["traceEvents"].size());
  o.cut.steps = {{3, 4}};
  o.step_section = "no-such-section";
  int rc = 0;
  trace(m, o, &rc);
  EXPECT_EQ(rc, 2);  // no steps to cut by: an error, not an empty trace
  o.step_section.clear();
  o.cut.steps = {{12, 20}};
  trace(m, o, &rc);
  EXPECT_EQ(rc, 2);  // beyond the run's 12 steps
}

// ---- near-threshold digits ----------------------------------------------------------------

TEST(ScoreDigits, GpuTableShowsTheDigitsThatDecide) {
  RunModel m;
  GpuScoreReport gpu;
  gpu.any = true;
  for (int r = 0; r < 2; ++r) {
    RankGpu g;
    g.rank = r;
    g.host = "h";
    g.has_data = true;
    g.kernel_count = 10;
    g.score.relative = r == 0 ? 1.0 : 0.7496;  // below 0.75, and 0.75 at two digits
    g.score.individual = r == 0 ? 0.7502 : 1.0;  // above: two digits say so
    g.sections["fwd"] = g.score;
    gpu.ranks.push_back(g);
  }
  std::ostringstream text;
  render_gpu_text(m, gpu, text);
  EXPECT_NE(text.str().find(" 0.7496 "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("1 (0.7496)"), std::string::npos) << text.str();  // worst rank per section
  EXPECT_NE(text.str().find(" 0.75 "), std::string::npos) << text.str();     // 0.7502: at or above
}

// Two ranks (no per-step evidence): the verdict names the NVRx score, which lies just below 0.75.
TEST(ScoreDigits, VerdictShowsTheDigitsThatDecide) {
  RunModel m;
  m.run_id = "r";
  m.dir = "d";
  m.world_size = 2;
  constexpr int64_t kS = 1'000'000'000;
  for (int r = 0; r < 2; ++r) {
    RankData rd;
    rd.rank = r;
    rd.host = "node" + std::to_string(r);
    rd.flush_s = 1;
    rd.final = true;
    for (int k = 0; k < 8; ++k) {
      CaptureWindow w;
      w.index = k;
      w.start_ns = 100 * kS + k * kS;
      w.end_ns = w.start_ns + kS;
      const int64_t dur = r == 1 ? 133'404'000 : 100'000'000;  // 100 / 133.404 = 0.74960
      SectionWindow part{.name = "part", .parent = "", .count = 5};
      for (int i = 0; i < 5; ++i) part.occurrences.push_back({w.start_ns + i * dur, dur, 1, 1.0});
      part.total_ns = 5 * dur;
      part.min_ns = part.max_ns = part.median_ns = dur;
      w.sections = {part};
      rd.windows.push_back(w);
    }
    m.ranks.push_back(rd);
  }
  cli::ReportOptions o;
  std::ostringstream out, err;
  ASSERT_EQ(cli::report_model(m, o, out, err), 0) << err.str();
  const std::string text = out.str();
  const std::string verdict = text.substr(text.find("Verdict"), text.find("Stragglers") - text.find("Verdict"));
  EXPECT_NE(verdict.find("NVRx relative score 0.7496"), std::string::npos) << verdict;
  EXPECT_NE(text.find("relative   0.7496  8/8 windows"), std::string::npos) << text;  // the stragglers table too
}


// The progress bar goes on through the analyses of a long merge (issue 15): report_model names
// each analysis as it starts and says "" (wipe the bar) before the first byte of output.
TEST(Progress, ReportNamesEachAnalysisThenClearsBeforeOutput) {
  RunModel m = synth::make_run(small_spec());
  std::vector<std::string> stages;
  std::ostringstream out, err;
  cli::ReportOptions o;
  o.on_stage = [&](const std::string& s) {
    stages.push_back(s);
    if (s.empty()) { EXPECT_EQ(out.str(), "") << "output began before the bar was wiped"; }
  };
  ASSERT_EQ(cli::report_model(m, o, out, err), 0) << err.str();
  ASSERT_GE(stages.size(), 3u);
  EXPECT_EQ(stages.front(), "section scores (collectives beside)");
  EXPECT_EQ(stages.back(), "");
  EXPECT_FALSE(out.str().empty());
}

}  // namespace
}  // namespace laggard::report
