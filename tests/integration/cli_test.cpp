// What a newcomer meets at the command line (issue 30 item 7): a mistyped command is named with what
// was meant, every usage error exits 2 (CLI11's own codes 105/106/109 are not the tool's), `--html`
// says where the page went, `trace` needs -o, `cat` of a run directory prints its rank files, and the
// demo has --help; and the test script names the tests that needed a retry (item 5).
#include <fstream>

#include "harness.h"

namespace laggard::test {
namespace cli_test {

namespace fs = std::filesystem;

class Cli : public Scratch {};

ProcessResult laggard(const std::vector<std::string>& args, const std::string& cwd = "") {
  std::vector<std::string> argv = {kLaggard};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions o = clean_env();
  o.cwd = cwd;
  return run_process(argv, o);
}

TEST_F(Cli, AMistypedCommandIsNamedWithWhatWasMeant) {
  ProcessResult r = laggard({"reprot", out()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'reprot'; did you mean 'report'?"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("commands: run, report, diff"), std::string::npos) << r.err;  // was: "A subcommand is required"
  ProcessResult far = laggard({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.err.find("unknown command 'frobnicate'"), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;  // nothing close
}

TEST_F(Cli, EveryUsageErrorExitsTwoAndHelpExitsZero) {
  // Was: 106 (a missing argument), 105 (a bad value), 109 (an extra argument), CLI11's own codes.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"report"}, {"report", out(), "--top", "many"}, {"report", out(), out(), out()},
        {"report", out(), "--no-such-option"}, {"watch", out(), "--interval", "-1"}, {}}) {
    ProcessResult r = laggard(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.exit_code, 2) << "laggard " << line << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << "laggard " << line;
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"}, {"report", "--help"}, {"--version"}}) {
    ProcessResult r = laggard(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << "\n" << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

TEST_F(Cli, HtmlSaysWhereItWroteTraceNeedsAFileAndCatReadsARunDirectory) {
  ProcessOptions env = clean_env();
  env.env["LAGGARD_RUN_ID"] = "cli";
  ProcessResult run = run_process({kLaggard, "run", "--nproc", "2", "--flush-s", "0.2", "--out", out(), "--", kDemo,
                                   "--steps", "8"},
                                  env);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const std::string page = dir + "/page.html";
  ProcessResult html = laggard({"report", out(), "--html", page});
  EXPECT_EQ(html.exit_code, 0) << html.err;
  EXPECT_NE(html.err.find("wrote the HTML report to " + page + " ("), std::string::npos) << html.err;  // was: nothing
  EXPECT_TRUE(fs::is_regular_file(page));

  // Was: laggard-trace.json dropped in the current directory.
  const std::string cwd = dir + "/cwd";
  fs::create_directories(cwd);
  ProcessResult trace = laggard({"trace", out()}, cwd);
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_NE(trace.err.find("--output is required"), std::string::npos) << trace.err;
  EXPECT_TRUE(fs::is_empty(cwd));

  // Was: "not JSON and not a frame file: [json.exception.parse_error.101] ..." for the directory.
  ProcessResult cat = laggard({"cat", out() + "/cli"});
  EXPECT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(std::count(cat.out.begin(), cat.out.end(), '\n'), 2) << "one JSON document per rank file";
  for (size_t at = 0, rank = 0; at < cat.out.size(); ++rank) {
    const size_t eol = cat.out.find('\n', at);
    nlohmann::json j = nlohmann::json::parse(cat.out.substr(at, eol - at), nullptr, false);
    EXPECT_EQ(j.value("rank", -1), static_cast<int>(rank));  // in name order
    at = eol + 1;
  }
  ProcessResult none = laggard({"cat", out()});  // the output directory: runs, no rank files
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("is a directory without rank files"), std::string::npos) << none.err;
  std::ofstream(dir + "/empty.lgr").close();
  ProcessResult empty = laggard({"cat", dir + "/empty.lgr"});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("empty file"), std::string::npos) << empty.err;
  EXPECT_EQ(empty.err.find("json.exception"), std::string::npos) << empty.err;
}

TEST_F(Cli, TheDemoHasHelp) {
  ProcessResult help = run_process({kDemo, "--help"}, clean_env());
  EXPECT_EQ(help.exit_code, 0);  // was: "unknown option --help", exit 2
  EXPECT_NE(help.out.find("Usage: laggard-demo [OPTIONS]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--slow-section NAME"), std::string::npos) << help.out;
  ProcessResult bad = run_process({kDemo, "--slow-rnak", "2"}, clean_env());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown option --slow-rnak"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("laggard-demo --help"), std::string::npos) << bad.err;
}

// Issue 30 item 5: scripts/test (through scripts/ctest-run) ends with the tests that failed a try
// and passed a retry, so a flaky test is named instead of hidden among ~1,100 lines; with no
// retries (the default) it says every test ran once. A hand-written ctest directory: a steady test,
// one that fails its first try only, one that always fails.
TEST_F(Cli, TheTestScriptEndsWithTheTestsThatNeededARetry) {
  const std::string tests = dir + "/ctest";
  fs::create_directories(tests);
  std::ofstream(tests + "/CTestTestfile.cmake")
      << "add_test(Steady.Passes /bin/true)\n"
      << "add_test(Flaky.FailsItsFirstTry /bin/sh -c \"test -e " << tests << "/tried || { touch " << tests
      << "/tried; exit 1; }\")\n"
      << "add_test(Broken.AlwaysFails /bin/false)\n"
      // A test that says it cannot run here ("***Skipped") is not a failed try (seen under TSan).
      << "add_test(Skips.Itself /bin/sh -c \"exit 77\")\n"
      << "set_tests_properties(Skips.Itself PROPERTIES SKIP_RETURN_CODE 77)\n";
  const std::string script = std::string(LAGGARD_SOURCE_DIR) + "/scripts/ctest-run";
  ProcessResult r = run_process({script, "2", "--test-dir", tests}, clean_env());
  EXPECT_NE(r.exit_code, 0) << r.out;  // Broken.AlwaysFails still fails the run
  const size_t list = r.out.rfind("laggard: these tests failed a try and passed a retry");
  ASSERT_NE(list, std::string::npos) << r.out << r.err;
  const std::string tail = r.out.substr(list);
  EXPECT_NE(tail.find("\n  Flaky.FailsItsFirstTry\n"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("Broken"), std::string::npos) << tail;  // failed every try: in ctest's own list
  EXPECT_EQ(tail.find("Steady"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("Skips"), std::string::npos) << tail;

  fs::remove(tests + "/tried");
  ProcessResult once = run_process({script, "0", "--test-dir", tests, "-R", "Flaky"}, clean_env());
  EXPECT_NE(once.exit_code, 0) << once.out;  // no retry: its first failure fails the run
  EXPECT_NE(once.out.find("laggard: every test ran once, no retries"), std::string::npos) << once.out;
  fs::remove(tests + "/tried");
  ProcessResult none = run_process({script, "2", "--test-dir", tests, "-R", "Steady"}, clean_env());
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_NE(none.out.find("laggard: no test needed a retry"), std::string::npos) << none.out;
}

}  // namespace cli_test
}  // namespace laggard::test
