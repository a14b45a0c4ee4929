// A stand-in for a profiler plugin NCCL loads by default: libnccl-profiler.so on the library
// path (NCCL's plugin_open.cc opens that name when NCCL_PROFILER_PLUGIN is unset). laggard sets
// the variable, so NCCL loads laggard instead; the tests check that laggard says so. Loaded by
// itself (NCCL_PROFILER_PLUGIN unset, laggard off) it answers like a minimal real plugin.
#include "abi_v5.h"

namespace {

namespace nabi = laggard::nccl::abi;

nabi::Result init(void** context, uint64_t, int* mask, const char*, int, int, int, nabi::DebugLogger) {
  static int ctx;
  *context = &ctx;
  *mask = nabi::kColl;
  return nabi::kSuccess;
}
nabi::Result start(void*, void** handle, nabi::DescrV5*) {
  *handle = nullptr;
  return nabi::kSuccess;
}
nabi::Result stop(void*) { return nabi::kSuccess; }
nabi::Result record(void*, int, nabi::StateArgs*) { return nabi::kSuccess; }
nabi::Result finalize(void*) { return nabi::kSuccess; }

}  // namespace

extern "C" {
__attribute__((visibility("default"))) nabi::ProfilerV5 ncclProfiler_v5 = {"fake-default", init, start, stop, record,
                                                                           finalize};
}
