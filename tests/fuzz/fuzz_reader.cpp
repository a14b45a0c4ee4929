// libFuzzer target: the rank-file reader alone (fuzz_report.h read_as_two_ranks): one rank file,
// JSON of any schema version or v5 binary frames (chosen by the file's first bytes, as a real
// file's name would), parsed and assembled into a run. The reader must refuse or read every
// input, never crash; this target is lean so it runs millions of inputs. fuzz_report takes the
// same inputs through every analysis and renderer, and fuzz_frames mutates frames with valid
// checksums.
#include <cstring>

#include "fuzz_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool frames = size >= 4 && std::memcmp(data, "LGF5", 4) == 0;
  laggard::report::RunModel model;
  laggard::fuzz::read_as_two_ranks(data, size, frames ? "fuzz/rank00000-1-seg0000.lgr" : "fuzz/rank0.json", model);
  return 0;
}
