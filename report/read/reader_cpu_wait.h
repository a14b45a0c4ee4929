// A window's optional "cpu_wait" object (issue 30, docs/schema.md "Issue 30: CPU wait"): how long
// the rank's threads waited for a CPU. Read by both the DOM and the fast reader.
#pragma once

#include <nlohmann/json.hpp>

#include "model.h"

namespace laggard::report {

// Reads it into cw.cpu_wait (needs cw's start); throws on an impossible value (the window is then
// left out, as for any impossible value): not an object, a negative or non-integer time, ticks out
// of time order, one thread waiting more than all.
void read_cpu_wait_window(const nlohmann::json& v, CaptureWindow& cw);

}  // namespace laggard::report
