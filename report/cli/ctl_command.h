// `laggard ctl DIR pause|resume|window N`: switches capture of a running job off and on by
// writing the run directory's control file, which every rank's flush thread polls (no socket
// in the job). The file format is docs/schema.md's "Control file"; the library's reader is
// preload/control/control_file.cpp (capture and report share no code, only the documented format).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace laggard::cli {

struct CtlOptions {
  std::string dir;      // run directory, or an output directory holding exactly one run (or --run)
  std::string run_id;   // --run: which run under an output directory
  std::string command;  // pause, resume, window
  int64_t seconds = 0;  // window: how long capture runs before pausing again
};

// The control file's text for one request (exposed for tests).
std::string control_text(uint64_t seq, const std::string& command, int64_t seconds, int64_t issued_ns);

// The sequence number in an existing control file's text; 0 when there is none.
uint64_t control_seq(const std::string& text);

// Returns the exit status: 0 written, 2 bad use or the file could not be written.
int ctl_command(const CtlOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
