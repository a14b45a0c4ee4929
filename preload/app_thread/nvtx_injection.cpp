// NVTX's tool-attach entry point. Each NVTX instance in the process (every library built with
// the NVTX3 headers, plus libnvToolsExt) calls this once, with its own function tables.
#include <nvtx3/nvToolsExt.h>

#include "capture.h"
#include "log.h"
#include "nvtx_callbacks.h"

namespace {

template <class F>
void set_slot(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

bool fill(const NvtxExportTableCallbacks* cb, NvtxCallbackModule module,
          void (*fill_module)(NvtxFunctionTable, unsigned)) {
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return false;
  fill_module(table, size);
  return true;
}

void fill_core(NvtxFunctionTable t, unsigned n) {
  using namespace laggard::nvtx;
  set_slot(t, n, NVTX_CBID_CORE_RangeStartEx, &start_ex);
  set_slot(t, n, NVTX_CBID_CORE_RangeStartA, &start_a);
  set_slot(t, n, NVTX_CBID_CORE_RangeStartW, &start_w);
  set_slot(t, n, NVTX_CBID_CORE_RangeEnd, &end);
  set_slot(t, n, NVTX_CBID_CORE_RangePushEx, &push_ex);
  set_slot(t, n, NVTX_CBID_CORE_RangePushA, &push_a);
  set_slot(t, n, NVTX_CBID_CORE_RangePushW, &push_w);
  set_slot(t, n, NVTX_CBID_CORE_RangePop, &pop);
}

void fill_core2(NvtxFunctionTable t, unsigned n) {
  using namespace laggard::nvtx;
  set_slot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_start_ex);
  set_slot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, &domain_end);
  set_slot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push_ex);
  set_slot(t, n, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);
  set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string_a);
  set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, &domain_register_string_w);
  set_slot(t, n, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
  set_slot(t, n, NVTX_CBID_CORE2_DomainCreateW, &domain_create_w);
  set_slot(t, n, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
}

}  // namespace

// Fills NVTX's tables, first thing, and nothing more: capture starts on the first range or domain
// call (nvtx_callbacks.cpp). NVTX marks its instance "initialising" before calling this and "done"
// after, and a call into the instance that meets a slot not yet filled spins until "done"
// (nvtxInitOnce, nvtx3/nvtxDetail/nvtxInit.h). A child forked by another thread in between
// inherits "initialising" with no thread left to finish it: its first NVTX call spins forever.
// Starting capture here (about 12 ms: the counter's calibration, the flush thread, the run
// directory) made that window thousands of times longer than NVTX's own microseconds: children
// forked during a process's first NVTX call hung (hostile_app fork-in-first-nvtx-call).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  try {
    if (!get_export_table) return 0;  // 0: NVTX stays a no-op (it clears whatever was filled)
    auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks) || !cb->GetModuleFunctionTable) {
      LAGGARD_WARN_ONCE("this NVTX version offers no callback table; NVTX ranges are not captured");
      return 0;
    }
    // Filled first: from then on this instance's range calls reach us without passing its init.
    if (!fill(cb, NVTX_CB_MODULE_CORE, fill_core) || !fill(cb, NVTX_CB_MODULE_CORE2, fill_core2)) {
      LAGGARD_WARN_ONCE("NVTX refused its function tables; NVTX ranges are not captured");
      return 0;
    }
    if (!laggard::capture_may_start()) return 0;
    if (auto* vi = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
        vi && vi->struct_size >= sizeof(NvtxExportTableVersionInfo) && vi->SetInjectionNvtxVersion)
      vi->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
  } catch (...) {
    return 0;
  }
}
