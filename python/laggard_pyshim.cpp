// The automatic PyTorch sections' way into NVTX (docs/pytorch.md). laggard_torch.py loads this
// library with ctypes.PyDLL (no GIL release: every call is a few dozen instructions) and calls
// it with small integers, one call per range edge. It holds no state of laggard's: it calls
// NVTX3, which is header-only, so the library needs no CUDA. NVTX hands the calls to the tool
// named by NVTX_INJECTION64_PATH, which liblaggard.so sets to itself when it is preloaded; with
// no tool attached every call returns at once (NVTX's own no-op), and laggard_torch.py does not
// load this library at all when laggard is not the process' NVTX tool.
//
// Names: the Python side registers each section name once (laggard_pyshim_name) and pushes by
// index, so a push hashes no string. Domain "torch" holds the automatic sections; the
// laggard_pyshim_user_* calls use the default domain, for torch.cuda.nvtx on CPU builds of
// PyTorch, whose own NVTX functions are missing.
//
// Called from Python only, with the GIL held: the name table needs no lock. Nothing here throws.
#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace {

constexpr int kMaxNames = 4096;  // distinct section names (collectives add one per op and group)

nvtxDomainHandle_t g_domain = nullptr;
bool g_domain_made = false;
nvtxStringHandle_t g_names[kMaxNames];
int g_count = 0;

nvtxEventAttributes_t attributes_of(int index) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = index >= 0 && index < g_count ? g_names[index] : nullptr;
  return a;
}

}  // namespace

extern "C" {

// What laggard_torch.py checks before it trusts the other functions.
__attribute__((visibility("default"))) int laggard_pyshim_version() { return 1; }

// Registers a section name in domain "torch"; returns its index, or -1 when the table is full.
__attribute__((visibility("default"))) int laggard_pyshim_name(const char* message) {
  if (!g_domain_made) {
    g_domain = nvtxDomainCreateA("torch");
    g_domain_made = true;
  }
  if (g_count >= kMaxNames) return -1;
  g_names[g_count] = nvtxDomainRegisterStringA(g_domain, message ? message : "");
  return g_count++;
}

__attribute__((visibility("default"))) void laggard_pyshim_push(int index) {
  nvtxEventAttributes_t a = attributes_of(index);
  nvtxDomainRangePushEx(g_domain, &a);
}

__attribute__((visibility("default"))) void laggard_pyshim_pop() { nvtxDomainRangePop(g_domain); }

// The step boundary: close the open range of the domain and open `index`, in one call.
__attribute__((visibility("default"))) void laggard_pyshim_pop_push(int index) {
  nvtxDomainRangePop(g_domain);
  nvtxEventAttributes_t a = attributes_of(index);
  nvtxDomainRangePushEx(g_domain, &a);
}

// A range that may end on another thread (a collective whose future completes on the
// backend's thread). Returns NVTX's range id (0: not recorded).
__attribute__((visibility("default"))) uint64_t laggard_pyshim_start(int index) {
  nvtxEventAttributes_t a = attributes_of(index);
  return nvtxDomainRangeStartEx(g_domain, &a);
}

__attribute__((visibility("default"))) void laggard_pyshim_end(uint64_t id) { nvtxDomainRangeEnd(g_domain, id); }

// torch.cuda.nvtx's functions, in NVTX's default domain as PyTorch's CUDA builds call them.
__attribute__((visibility("default"))) int laggard_pyshim_user_push(const char* message) {
  return nvtxRangePushA(message);
}
__attribute__((visibility("default"))) int laggard_pyshim_user_pop() { return nvtxRangePop(); }
__attribute__((visibility("default"))) uint64_t laggard_pyshim_user_start(const char* message) {
  return nvtxRangeStartA(message);
}
__attribute__((visibility("default"))) void laggard_pyshim_user_end(uint64_t id) { nvtxRangeEnd(id); }
__attribute__((visibility("default"))) void laggard_pyshim_user_mark(const char* message) { nvtxMarkA(message); }

}  // extern "C"
