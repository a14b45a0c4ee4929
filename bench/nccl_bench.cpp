// NCCL profiler-plugin cost per collective, driven by a fake NCCL (no GPU). Two views:
//   BM_PluginTable/C - BM_NoPlugin/C: through the ncclProfiler_v5 table NCCL loads from the preloaded
//     liblaggard.so: every callback NCCL 2.28 makes for one collective on C channels (API and
//     group events, the collective's start/stop, C kernel-channel start/state/stop), on the
//     calling thread, while laggard's flush thread harvests in the background. Needs the
//     library preloaded (bench/run-nccl does it); skipped otherwise.
//   BM_CoreWithHarvest/C: the same events on the version-independent core, plus the flush
//     thread's share (harvest + building the window) done inline: all plugin CPU per collective.
// Goal (issue 5): <= 1 us of plugin CPU per collective.
//
//   laggard-bench-nccl [google-benchmark flags]
//   laggard-bench-nccl --memory N   N collectives (8 channels) through the table; print peak RSS
#include "bench_main.h"
#include <dlfcn.h>
#include <strings.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "abi_v5.h"
#include "clock.h"
#include "profiler.h"

namespace {

namespace nabi = laggard::nccl::abi;

struct Plugin {
  nabi::ProfilerV5* table = nullptr;
  void* ctx = nullptr;
};

// As NCCL opens it: NCCL_PROFILER_PLUGIN (the preloaded laggard sets it), STATIC_PLUGIN = process.
Plugin& plugin() {
  static Plugin p = [] {
    Plugin out;
    const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
    if (!name || !*name) return out;
    bool is_static = strncasecmp(name, "STATIC_PLUGIN", std::strlen(name)) == 0;
    void* lib = dlopen(is_static ? nullptr : name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return out;
    out.table = static_cast<nabi::ProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
    int mask = 0;
    if (out.table) out.table->init(&out.ctx, 0xbe7c4, &mask, "bench", 1, 2, 0, nullptr);
    if (!mask) out.table = nullptr;
    return out;
  }();
  return p;
}

// One collective as NCCL 2.28 reports it to a v5 plugin.
void collective(const Plugin& p, uint64_t seq, int channels) {
  nabi::ProfilerV5* t = p.table;
  nabi::DescrV5 api{};
  api.type = nabi::kGroupApi;
  void* api_h = nullptr;
  t->startEvent(p.ctx, &api_h, &api);
  nabi::DescrV5 capi{};
  capi.type = nabi::kCollApi;
  void* capi_h = nullptr;
  t->startEvent(p.ctx, &capi_h, &capi);
  if (capi_h) t->stopEvent(capi_h);
  if (api_h) t->recordEventState(api_h, 23, nullptr);
  if (api_h) t->recordEventState(api_h, 24, nullptr);
  nabi::DescrV5 group{};
  group.type = nabi::kGroup;
  void* group_h = nullptr;
  t->startEvent(p.ctx, &group_h, &group);
  nabi::DescrV5 d{};
  d.type = nabi::kColl;
  d.parentObj = capi_h;
  d.coll.seqNumber = seq;
  d.coll.func = "AllReduce";
  d.coll.count = 1 << 20;
  d.coll.datatype = "ncclBfloat16";
  d.coll.nChannels = static_cast<uint8_t>(channels);
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  d.coll.parentGroup = group_h;
  void* op = nullptr;
  t->startEvent(p.ctx, &op, &d);
  if (op) t->stopEvent(op);
  if (group_h) t->stopEvent(group_h);
  if (api_h) t->stopEvent(api_h);
  for (int c = 0; c < channels; ++c) {  // the proxy thread's part
    nabi::DescrV5 k{};
    k.type = nabi::kKernelCh;
    k.parentObj = op;
    k.kernelCh.channelId = static_cast<uint8_t>(c);
    k.kernelCh.pTimer = 1'000'000 + seq * 1000 + c;
    void* h = nullptr;
    t->startEvent(p.ctx, &h, &k);
    if (!h) continue;
    nabi::StateArgs a{};
    a.kernelCh.pTimer = k.kernelCh.pTimer + 500;
    t->recordEventState(h, nabi::kStateKernelChStop, &a);
    t->stopEvent(h);
  }
}

// The fake driver's own cost (building descriptors, calling through the table): a plugin whose
// callbacks do nothing but hand out a handle. Subtracted from BM_PluginTable by bench/run-nccl.
nabi::Result noop_start(void*, void** h, nabi::DescrV5*) {
  *h = reinterpret_cast<void*>(1);
  return nabi::kSuccess;
}
nabi::Result noop_stop(void*) { return nabi::kSuccess; }
nabi::Result noop_record(void*, int, nabi::StateArgs*) { return nabi::kSuccess; }
nabi::ProfilerV5 g_noop = {"noop", nullptr, noop_start, noop_stop, noop_record, nullptr};

void BM_NoPlugin(benchmark::State& state) {
  Plugin p;
  p.table = &g_noop;
  benchmark::DoNotOptimize(p.table);
  const int channels = static_cast<int>(state.range(0));
  uint64_t seq = 0;
  for (auto _ : state) collective(p, seq++, channels);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NoPlugin)->Arg(1)->Arg(2)->Arg(8)->Arg(16)->Arg(32);

void BM_PluginTable(benchmark::State& state) {
  const Plugin& p = plugin();
  if (!p.table) {
    state.SkipWithError("no plugin: run with liblaggard.so preloaded (bench/run-nccl)");
    return;
  }
  const int channels = static_cast<int>(state.range(0));
  uint64_t seq = 0;
  for (auto _ : state) {
    collective(p, seq++, channels);
    // Give the flush thread (50 ms ticks) time to free the pool (8192 slots), so no op is
    // dropped: a dropped op would cost less than a recorded one and flatter the result.
    if (seq % 4096 == 0) {
      state.PauseTiming();
      std::this_thread::sleep_for(std::chrono::milliseconds(55));
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
// Fixed iterations: the pauses above would otherwise dominate the run time.
BENCHMARK(BM_PluginTable)->Arg(1)->Arg(2)->Arg(8)->Arg(16)->Arg(32)->Iterations(1 << 18);

void BM_CoreWithHarvest(benchmark::State& state) {
  using laggard::nccl::Profiler;
  static Profiler* core = new Profiler({}, 0);
  static void* ctx = core->add_comm(7, "bench", 1, 2, 0);
  const int channels = static_cast<int>(state.range(0));
  laggard::nccl::CollInfo info;
  info.func = "AllReduce";
  info.count = 1 << 20;
  info.datatype = "ncclBfloat16";
  info.nchannels = static_cast<uint8_t>(channels);
  info.algo = "RING";
  info.proto = "SIMPLE";
  uint64_t seq = 0;
  size_t written = 0;
  for (auto _ : state) {
    info.seq = seq++;
    void* op = core->start_coll(ctx, info);
    core->stop(op);
    for (int c = 0; c < channels; ++c) {
      void* k = core->start_kernel_ch(op, static_cast<uint8_t>(c), 1000 + c);
      core->record_kernel_ch_stop(k, 2000 + c);
      core->stop(k);
    }
    if (seq % 1024 == 0) {  // the flush thread's work, at the rate it would be needed
      core->harvest(laggard::mono_ns(), false);
      written += core->take_window().ops.size();
    }
  }
  core->harvest(laggard::mono_ns(), false);
  written += core->take_window().ops.size();
  if (written != seq) state.SkipWithError("not every collective was written");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CoreWithHarvest)->Arg(1)->Arg(2)->Arg(8)->Arg(16)->Arg(32);

int memory_mode(long n) {
  const Plugin& p = plugin();
  for (long i = 0; i < n; ++i) {
    if (p.table) collective(p, static_cast<uint64_t>(i), 8);
    if (i % 4096 == 4095) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::printf("collectives=%ld plugin=%s peak_rss_kb=%ld\n", n, p.table ? "laggard" : "none", laggard::bench::peak_rss_kb());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return laggard::bench::main(argc, argv, memory_mode); }
