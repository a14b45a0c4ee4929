// `laggard import kineto|nsys INPUT... --out RUN_DIR`: traces of other tools as a laggard run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace laggard::cli {

struct ImportOptions {
  std::string format;               // kineto | nsys
  std::vector<std::string> inputs;  // files, or (kineto) directories holding *.json / *.json.gz
  std::string out;                  // the run directory to write
  std::string run_id;               // default: the run directory's name
  int rank = -1;                    // with one input: its rank when the file does not say
};

// Exit codes: 0 every input imported, 1 some inputs skipped (each named on err), 2 none imported.
int import_command(const ImportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
