// Running a helper program (addr2line, scontrol, scancel) and reading what it prints.
#pragma once

#include <string>
#include <vector>

namespace laggard {

// Runs argv[0] (searched in PATH) with stdin and stderr on /dev/null and every signal unblocked;
// its stdout goes to *out when out is given (else to /dev/null). Returns its exit status, 128+N
// when killed by signal N, -1 when it could not be started. Waits for that one child only.
int run_program(const std::vector<std::string>& argv, std::string* out = nullptr);

}  // namespace laggard
