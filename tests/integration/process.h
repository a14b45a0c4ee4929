// Runs real programs for the integration tests: argv, environment changes, captured output.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace laggard::test {

struct ProcessResult {
  int exit_code = -1;   // valid when !signaled
  int term_signal = 0;  // non-zero when killed by a signal
  std::string out, err;
};

struct ProcessOptions {
  // Variables to set (value) or remove (nullopt) in the child's environment.
  std::map<std::string, std::optional<std::string>> env;
  std::string cwd;
  double timeout_s = 120;
};

// Starts argv and returns without waiting.
struct Running {
  pid_t pid = -1;
  std::string out_path, err_path;
};
Running start_process(const std::vector<std::string>& argv, const ProcessOptions& opts = {});
ProcessResult wait_process(const Running& r, double timeout_s = 120);

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts = {});

std::string read_file(const std::string& path);

}  // namespace laggard::test
