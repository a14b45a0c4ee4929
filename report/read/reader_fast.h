// The reader's fast path for one window object (issue 14: 10,000 ranks of summaries): reads
// sections, dropped counts, GPU kernel statistics and NCCL operations straight from a JsonTape
// into the model, without building an nlohmann DOM.
//
// It takes only what it is sure of: every value in the bounds of reader_values.h, no repeated
// key, no value that would become a note. Anything else (a float where a whole number is
// expected, a bad index, imported-trace or per-record JSON columns, ...) makes it decline, and
// the caller reads the window with the original DOM code, which then gives the same errors and
// notes as it always did. For every window it accepts, the result (strings interned in the same
// order included) is what the DOM code gives.
#pragma once

#include <string_view>

#include "json_tape.h"
#include "model.h"

namespace laggard::report {

// Reads the window at tape value `at` into `out`; interns its strings in `strings` and adds
// folded ranges to `folded_ranges` only when it accepts. Returns false when it declines; then
// `out`, `strings` and `folded_ranges` are as they were. Never throws.
bool read_window_fast(const JsonTape& tape, size_t at, int version, StringTable& strings, uint64_t& folded_ranges,
                      CaptureWindow& out, std::string_view binary_records = {});

}  // namespace laggard::report
