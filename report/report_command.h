// `laggard report DIR`: read, score, render.
#pragma once

#include <ostream>
#include <string>

#include "reader.h"
#include "scores.h"

namespace laggard::cli {

struct ReportOptions {
  std::string dir;
  std::string format = "text";   // text | json
  std::string output;            // file; empty: stdout
  report::ReadOptions read;
  report::ScoreOptions scores;
  bool fail_on_stragglers = false;
};

// Exit codes: 0 done, 2 nothing readable, 3 stragglers found with fail_on_stragglers.
int report_command(const ReportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
