// libFuzzer target: one JSON rank file (any schema version, docs/schema.md) through the whole
// report (fuzz_report.h). Binary v5 frame files have their own target, fuzz_frames, whose
// mutator keeps their checksums valid.
#include "fuzz_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  laggard::fuzz::report_rank_file(data, size, "fuzz/rank0.json");
  return 0;
}
