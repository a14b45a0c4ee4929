// `laggard cat FILE...`: prints rank files as JSON (docs/schema.md), binary frame files as the
// JSON segment of the same windows would be, so jq and tests can read either format.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace laggard::cli {

// One JSON document per file, one per line (--pretty: indented); a directory stands for the rank
// files in it (a run directory), in name order. Returns 0, or 1 when a file
// could not be read whole (what could be read is printed; why goes to `err`).
int cat_command(const std::vector<std::string>& files, bool pretty, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
