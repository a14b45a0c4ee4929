// libFuzzer target: one JSON rank file (any schema version, docs/schema.md) through the whole
// report (fuzz_report.h): read, every analysis, text and JSON reports and a trace. Slower per
// input than fuzz_reader, which covers the reader alone; seeds: corpus/reader.
#include "fuzz_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  laggard::fuzz::report_rank_file(data, size, "fuzz/rank0.json");
  return 0;
}
