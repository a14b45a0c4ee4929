// Text output shows names from the files (NVTX sections, hosts, kernels, communicators, run
// ids, paths) to a terminal: control characters in them are written as visible escapes (\x1b,
// \n, \u009b), so a name can neither drive the terminal nor forge report lines. JSON output
// keeps the names as they are (JSON escapes them itself).
#pragma once

#include <string>
#include <string_view>

#include "model.h"

namespace laggard::report {

// C0 controls, DEL and the UTF-8 encoded C1 controls (U+0080..U+009F) escaped; all else as is.
std::string escape_text(std::string_view s);

// A copy of the model with every name and message escaped, for the text renderers.
RunModel escaped_for_text(RunModel model);  // by value: callers move a large model in

}  // namespace laggard::report
