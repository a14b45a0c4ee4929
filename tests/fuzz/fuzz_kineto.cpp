// libFuzzer target: the PyTorch profiler (Kineto) JSON importer (report/import/import_kineto.*;
// the format as HTA reads it, docs/import.md). The input is the trace file; an import that
// succeeds is written as a rank file and reported (fuzz_import.h). Expected outcomes: a
// std::runtime_error naming what is wrong with the trace, or a report; anything else (a crash,
// a sanitizer report such as a signed overflow or an out-of-range float conversion, another
// exception type, a leak) is a bug. Seeds: corpus/kineto, hand-written traces modelled on HTA's
// test data (../shared/traces/kineto-hta, not copied).
#include "fuzz_import.h"
#include "import_kineto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path input = laggard::fuzz::scratch_dir() / "trace.json";
  laggard::fuzz::write_file(input, data, size);
  laggard::report::KinetoOptions options;
  options.rank = size % 2 ? 3 : -1;  // both with and without --rank
  laggard::report::ImportedRank r;
  try {
    r = laggard::report::import_kineto(input.string(), options);
  } catch (const std::runtime_error&) {
    return 0;
  }
  laggard::fuzz::report_imported(r);
  return 0;
}
