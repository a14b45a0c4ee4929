// A fake NVTX driver: loads liblaggard.so and attaches it the way NVTX3 does (export tables,
// InitializeInjectionNvtx2), then calls the installed callbacks and checks what was written.
// Its own executable: loading the library sets environment variables and starts threads.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "reader.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace nvtx_injection_test {

NvtxFunctionPointer g_core[NVTX_CBID_CORE_SIZE];
NvtxFunctionPointer g_core2[NVTX_CBID_CORE2_SIZE];
NvtxFunctionPointer* g_core_table[NVTX_CBID_CORE_SIZE];
NvtxFunctionPointer* g_core2_table[NVTX_CBID_CORE2_SIZE];
uint32_t g_version_set = 0;

int get_module_table(NvtxCallbackModule module, NvtxFunctionTable* out, unsigned* size) {
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

void set_version(uint32_t v) { g_version_set = v; }

const void* get_export_table(uint32_t id) {
  static NvtxExportTableCallbacks callbacks{sizeof(NvtxExportTableCallbacks), get_module_table};
  static NvtxExportTableVersionInfo version{sizeof(NvtxExportTableVersionInfo), NVTX_VERSION, 0, set_version};
  if (id == NVTX_ETID_CALLBACKS) return &callbacks;
  if (id == NVTX_ETID_VERSIONINFO) return &version;
  return nullptr;
}

template <class F>
F core(int id) { return reinterpret_cast<F>(g_core[id]); }
template <class F>
F core2(int id) { return reinterpret_cast<F>(g_core2[id]); }

class NvtxInjection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = laggard::testing::per_process_out_dir(LAGGARD_TEST_OUT);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LAGGARD_OUT", out_.c_str(), 1);
    setenv("LAGGARD_RUN_ID", "unit", 1);
    setenv("LAGGARD_FLUSH_S", "0.1", 1);
    unsetenv("NVTX_INJECTION64_PATH");
    for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) g_core_table[i] = &g_core[i];
    for (int i = 0; i < NVTX_CBID_CORE2_SIZE; ++i) g_core2_table[i] = &g_core2[i];
    handle_ = dlopen(LAGGARD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    init_ = reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(dlsym(handle_, "InitializeInjectionNvtx2"));
    ASSERT_NE(init_, nullptr);
  }

  static laggard::report::RunModel wait_for_data(size_t want_sections) {
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      try {
        auto m = laggard::report::read_run((out_ / "unit").string());
        size_t n = 0;
        for (const auto& w : m.ranks.at(0).windows) n += w.sections.size();
        if (n >= want_sections) return m;
      } catch (...) {
      }
    }
    ADD_FAILURE() << "no data flushed";
    return {};
  }

  static inline fs::path out_;
  static inline void* handle_ = nullptr;
  static inline NvtxInitializeInjectionNvtxFunc_t init_ = nullptr;
};

TEST_F(NvtxInjection, ConstructorClaimsTheInjectionVariable) {
  const char* v = getenv("NVTX_INJECTION64_PATH");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(fs::canonical(v), fs::canonical(LAGGARD_LIBRARY));
  EXPECT_EQ(dlsym(handle_, "laggard_internal_symbol_that_must_not_exist"), nullptr);
}

TEST_F(NvtxInjection, AttachesAndCapturesEveryKindOfRange) {
  ASSERT_EQ(init_(get_export_table), 1);
  EXPECT_EQ(g_version_set, static_cast<uint32_t>(NVTX_VERSION));
  for (int id : {NVTX_CBID_CORE_RangePushA, NVTX_CBID_CORE_RangePushW, NVTX_CBID_CORE_RangePushEx,
                 NVTX_CBID_CORE_RangePop, NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartW,
                 NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeEnd})
    EXPECT_NE(g_core[id], nullptr) << id;
  EXPECT_EQ(g_core[NVTX_CBID_CORE_MarkA], nullptr);  // marks are not sections

  auto push_a = core<int (*)(const char*)>(NVTX_CBID_CORE_RangePushA);
  auto push_w = core<int (*)(const wchar_t*)>(NVTX_CBID_CORE_RangePushW);
  auto push_ex = core<int (*)(const nvtxEventAttributes_t*)>(NVTX_CBID_CORE_RangePushEx);
  auto pop = core<int (*)()>(NVTX_CBID_CORE_RangePop);
  auto start_a = core<nvtxRangeId_t (*)(const char*)>(NVTX_CBID_CORE_RangeStartA);
  auto end = core<void (*)(nvtxRangeId_t)>(NVTX_CBID_CORE_RangeEnd);
  auto domain_create = core2<nvtxDomainHandle_t (*)(const char*)>(NVTX_CBID_CORE2_DomainCreateA);
  auto reg = core2<nvtxStringHandle_t (*)(nvtxDomainHandle_t, const char*)>(NVTX_CBID_CORE2_DomainRegisterStringA);
  auto dpush = core2<int (*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(NVTX_CBID_CORE2_DomainRangePushEx);
  auto dpop = core2<int (*)(nvtxDomainHandle_t)>(NVTX_CBID_CORE2_DomainRangePop);

  EXPECT_EQ(pop(), -1);  // unbalanced, and harmless
  EXPECT_EQ(push_a("step"), 0);
  EXPECT_EQ(push_w(L"fwd\u00e9"), 1);
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = "attn";
  EXPECT_EQ(push_ex(&attr), 2);
  EXPECT_EQ(pop(), 2);
  EXPECT_EQ(pop(), 1);

  nvtxDomainHandle_t d = domain_create("mylib");
  EXPECT_EQ(d, domain_create("mylib"));
  nvtxEventAttributes_t reg_attr = attr;
  reg_attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  reg_attr.message.registered = reg(d, "comm");
  EXPECT_EQ(dpush(d, &reg_attr), 1);
  EXPECT_EQ(dpop(d), 1);

  nvtxRangeId_t id = start_a("load");
  EXPECT_NE(id, 0u);
  std::thread([&] { end(id); }).join();
  end(id);  // second end: unknown id, counted
  EXPECT_EQ(pop(), 0);

  auto m = wait_for_data(5);
  ASSERT_EQ(m.ranks.size(), 1u);
  const auto& r = m.ranks[0];
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  std::map<std::string, std::string> parent_of;
  for (const auto& w : r.windows)
    for (const auto& s : w.sections) parent_of[s.name] = s.parent;
  EXPECT_EQ(parent_of.at("step"), "");
  EXPECT_EQ(parent_of.at("fwd\xc3\xa9"), "step");
  EXPECT_EQ(parent_of.at("attn"), "fwd\xc3\xa9");
  EXPECT_EQ(parent_of.at("mylib:comm"), "");  // pushed inside "step", of another domain: top level of its own (issue 25)
  EXPECT_EQ(parent_of.at("load"), "");
  EXPECT_EQ(r.dropped.at("unbalanced_pop"), 1u);
  EXPECT_EQ(r.dropped.at("unmatched_end"), 1u);
}

TEST_F(NvtxInjection, RefusesAnExportTableWithoutCallbacks) {
  auto none = [](uint32_t) -> const void* { return nullptr; };
  EXPECT_EQ(init_(none), 0);
  EXPECT_EQ(init_(nullptr), 0);
}

}  // namespace
