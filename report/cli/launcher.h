// `laggard run`: start a command (or N local ranks of it) with liblaggard preloaded.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace laggard::cli {

struct RunOptions {
  std::string out_dir = "laggard-out";
  std::string sections;
  std::optional<double> flush_s;
  std::string log;
  int nproc = 0;                 // 0: run the command once; it is usually a launcher itself
  std::string library;           // liblaggard.so; empty: next to this executable
  bool quiet = false;
  bool report_after = false;     // the caller prints the report: no "next:" hint
  std::vector<std::string> command;
};

struct RunResult {
  int exit_code = 0;
  int term_signal = 0;           // single command killed by this signal
  std::string run_dir;           // the run directory written last (where the files would go if none is)
  std::vector<std::string> run_dirs;  // every run directory of this launch, the last written last: one per
                                      // launch inside it (srun steps, mpiruns, restarts; docs/slurm.md)
};

// Throws std::runtime_error for usage problems (no command, library not found).
RunResult run_command(const RunOptions& options);

// Locates liblaggard.so: $LAGGARD_LIB, else beside the laggard executable or in ../lib.
std::string find_library();

// The directory holding laggard's sitecustomize.py for library `lib` (docs/pytorch.md):
// $LAGGARD_PYTHON_DIR, else python/ or laggard/python/ beside it; "" when there is none.
std::string find_python_dir(const std::string& lib);

}  // namespace laggard::cli
