// A fake NVTX driver: hands liblaggard.so the export tables NVTX3 hands a tool
// (nvtxDetail/nvtxInit.h: InitializeInjectionNvtx2 gets nvtxGetExportTable, which returns
// NvtxExportTableCallbacks for NVTX_ETID_CALLBACKS, whose GetModuleFunctionTable gives the
// CORE and CORE2 slot tables), then lets a test call whatever the library installed.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace fake_nvtx {

inline NvtxFunctionPointer g_core[NVTX_CBID_CORE_SIZE];
inline NvtxFunctionPointer g_core2[NVTX_CBID_CORE2_SIZE];
inline NvtxFunctionPointer* g_core_table[NVTX_CBID_CORE_SIZE];
inline NvtxFunctionPointer* g_core2_table[NVTX_CBID_CORE2_SIZE];
inline uint32_t g_version_set = 0;

inline int get_module_table(NvtxCallbackModule module, NvtxFunctionTable* out, unsigned* size) {
  if (module == NVTX_CB_MODULE_CORE) {
    *out = g_core_table;
    *size = NVTX_CBID_CORE_SIZE;
    return 1;
  }
  if (module == NVTX_CB_MODULE_CORE2) {
    *out = g_core2_table;
    *size = NVTX_CBID_CORE2_SIZE;
    return 1;
  }
  return 0;
}

inline void set_version(uint32_t v) { g_version_set = v; }

inline const void* get_export_table(uint32_t id) {
  static NvtxExportTableCallbacks callbacks{sizeof(NvtxExportTableCallbacks), get_module_table};
  static NvtxExportTableVersionInfo version{sizeof(NvtxExportTableVersionInfo), NVTX_VERSION, 0, set_version};
  if (id == NVTX_ETID_CALLBACKS) return &callbacks;
  if (id == NVTX_ETID_VERSIONINFO) return &version;
  return nullptr;
}

inline void reset_tables() {
  for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) g_core_table[i] = &g_core[i];
  for (int i = 0; i < NVTX_CBID_CORE2_SIZE; ++i) g_core2_table[i] = &g_core2[i];
}

template <class F>
F core(int id) { return reinterpret_cast<F>(g_core[id]); }
template <class F>
F core2(int id) { return reinterpret_cast<F>(g_core2[id]); }

}  // namespace fake_nvtx
