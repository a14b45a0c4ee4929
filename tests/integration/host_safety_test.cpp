// Fault injection (issue 10): a hostile or broken environment around the host application.
// Every test checks that the application's exit code and output are what they are without
// laggard, and that no file that looks valid says something wrong.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "harness.h"

namespace laggard::test {
namespace {

namespace fs = std::filesystem;

// ---- `laggard run` command line (issue 10 item 11) ----

TEST(LaggardRunCli, UnknownOptionBeforeDashesIsAnError) {
  // Was: `--nprocs 4 --flush 0.25` vanished and the command ran once, without RANK, rc 0.
  ProcessResult r = run_process({kLaggard, "run", "--nprocs", "4", "--flush", "0.25", "--", "true"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option '--nprocs'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Usage: laggard run [OPTIONS] -- CMD [ARGS...]"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, UnknownOptionWithoutDashesIsAnErrorNotTheCommand) {
  ProcessResult r = run_process({kLaggard, "run", "--nprocs", "4", "true"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option '--nprocs'"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, MissingLibraryIsAnError) {
  ProcessResult r = run_process({kLaggard, "run", "--lib", "/nonexistent.so", "--", "sh", "-c", "echo ran"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");  // the command did not run
  EXPECT_NE(r.err.find("/nonexistent.so"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, UsageLinesNameTheProgramAndTheCommand) {
  ProcessResult run = run_process({kLaggard, "run", "--help"}, clean_env());
  EXPECT_NE(run.out.find("Usage: laggard run [OPTIONS] -- CMD [ARGS...]"), std::string::npos) << run.out;
  ProcessResult top = run_process({kLaggard, "--help"}, clean_env());
  EXPECT_NE(top.out.find("Usage: laggard [OPTIONS] SUBCOMMAND"), std::string::npos) << top.out;
  ProcessResult rep = run_process({kLaggard, "report", "--help"}, clean_env());
  EXPECT_NE(rep.out.find("Usage: laggard report [OPTIONS] dir"), std::string::npos) << rep.out;
}

}  // namespace
}  // namespace laggard::test
