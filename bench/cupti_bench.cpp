// laggard's own cost in GPU capture, measured without a GPU (CUPTI replaced by the test fake):
//  - per launch: the enter+exit callback pair laggard adds to every kernel launch call (on the
//    application's thread; CUPTI's own dispatch cost comes on top and is measured on a GPU by
//    bench/gpu-overhead);
//  - per GPU record: parsing, the correlation join and aggregation (on CUPTI's worker thread or
//    the flush thread, off the application's threads), including each window's close;
//  - per record of another CUPTI client's buffer (torch.profiler's, issue 26): what laggard adds
//    to its buffer's way back to it, reading its kernel records (and, without a subscriber, its API
//    records to count launches laggard missed), on CUPTI's worker thread.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "fake_cupti_api.h"
#include "gpu_capture.h"
#include "shared_cupti.h"

namespace {

using laggard::cupti::GpuCapture;

thread_local uint32_t t_section = 7;
uint32_t section() { return t_section; }

void BM_LaunchCallbackPair(benchmark::State& state) {
  laggard::fake::FakeCupti api;
  GpuCapture cap(api, {}, &section);
  if (!cap.attach(0).empty()) state.SkipWithError("attach failed");
  CUpti_CallbackData enter{}, exit{};
  enter.callbackSite = CUPTI_API_ENTER;
  exit.callbackSite = CUPTI_API_EXIT;
  uint32_t corr = 1;
  for (auto _ : state) {
    enter.correlationId = exit.correlationId = corr++;
    GpuCapture::on_callback(&cap, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &enter);
    GpuCapture::on_callback(&cap, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &exit);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LaunchCallbackPair);

// One buffer of 1000 kernel records (20 kernel names, 4 sections), delivered the way CUPTI
// does; a window closes every 64 buffers.
void BM_RecordsParsedJoinedAggregated(benchmark::State& state) {
  laggard::cupti::reset_tenancy();
  laggard::fake::FakeCupti api;
  GpuCapture cap(api, {}, &section);
  if (!cap.attach(0).empty()) state.SkipWithError("attach failed");
  constexpr int kPerBuffer = 1000;
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back("_ZN7cutlass6KernelINS_4gemm6kernel" + std::to_string(i) + "EEEvNT_6ParamsE");
  std::vector<CUpti_ActivityKernel10> recs(kPerBuffer);
  uint32_t corr = 1;
  uint64_t t = 1'000'000'000;
  int buffers = 0;
  for (auto _ : state) {
    state.PauseTiming();
    uint8_t* buf = nullptr;  // one of laggard's own buffers, as CUPTI gets it
    size_t size = 0, max = 0;
    laggard::cupti::buffer_requested(&buf, &size, &max);
    if (!buf || size < kPerBuffer * (8 + sizeof(CUpti_ActivityKernel10))) state.SkipWithError("no buffer");
    size_t off = 0;
    for (int i = 0; i < kPerBuffer; ++i, ++corr) {
      CUpti_CallbackData cb{};
      cb.callbackSite = CUPTI_API_ENTER;
      cb.correlationId = corr;
      t_section = corr % 4;
      GpuCapture::on_callback(&cap, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
      CUpti_ActivityKernel10& k = recs[i];
      k = {};
      k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k.start = t;
      k.end = t + 1000 + (corr % 50);
      t += 2000;
      k.gridX = k.gridY = k.gridZ = 1;
      k.blockX = 128, k.blockY = k.blockZ = 1;
      k.correlationId = corr;
      k.name = names[corr % names.size()].c_str();
      uint64_t sz = sizeof k;
      std::memcpy(buf + off, &sz, 8);
      std::memcpy(buf + off + 8, &k, sizeof k);
      off += 8 + sizeof k;
    }
    state.ResumeTiming();
    laggard::cupti::buffer_completed(nullptr, 0, buf, size, off);
    if (++buffers % 64 == 0) {
      laggard::WindowSnapshot w;
      cap.close_window(w, false, [](uint32_t id) { return "section" + std::to_string(id); });
      benchmark::DoNotOptimize(w.gpu.records.size());
    }
  }
  state.SetItemsProcessed(state.iterations() * kPerBuffer);
}
BENCHMARK(BM_RecordsParsedJoinedAggregated)->Unit(benchmark::kMicrosecond);

// Another client's buffer of 1000 records (500 kernels, each with its cudaLaunchKernel API
// record, as torch.profiler's GPU sessions have them) handed back to it through laggard's buffer
// callback; its own bufferCompleted does nothing here. state.range(0): 1 = laggard holds its
// subscriber (kernel records read), 0 = it gave it up (API records read too, to count misses).
uint8_t* g_foreign_buffer = nullptr;
size_t g_foreign_size = 0;
void CUPTIAPI foreign_requested(uint8_t** b, size_t* size, size_t* max) {
  *b = g_foreign_buffer;
  *size = g_foreign_size;
  *max = 0;
}
void CUPTIAPI foreign_completed(CUcontext, uint32_t, uint8_t*, size_t, size_t) {}

void BM_ForeignBufferReadOnItsWayBack(benchmark::State& state) {
  using namespace laggard::cupti;
  reset_tenancy();
  laggard::fake::FakeCupti api;
  GpuCapture cap(api, {}, &section);
  if (!cap.attach(0).empty()) state.SkipWithError("attach failed");
  laggard::fake::FakeCuptiCore* core = &api.core;
  static laggard::fake::FakeCuptiCore* real = nullptr;
  real = core;
  auto reg = [](CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc done) {
    return real->register_buffers(rq, done);
  };
  foreign::register_callbacks(+reg, &foreign_requested, &foreign_completed, "libtorch_cuda.so");
  if (state.range(0) == 0) cap.give_subscriber();
  constexpr int kPerBuffer = 1000;
  std::vector<uint8_t> buf(kPerBuffer * (8 + sizeof(CUpti_ActivityKernel10)));
  g_foreign_buffer = buf.data();
  g_foreign_size = buf.size();
  size_t off = 0;
  const std::string name = "_ZN7cutlass6KernelINS_4gemm6kernel0EEEvNT_6ParamsE";
  for (uint32_t corr = 1; corr <= kPerBuffer / 2; ++corr) {
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1'000'000'000 + corr * 2000;
    k.end = k.start + 1000;
    k.correlationId = corr;
    k.name = name.c_str();
    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.start = k.start - 500;
    a.end = k.start - 100;
    a.correlationId = corr;
    for (auto [p, n] : {std::pair<const void*, size_t>{&k, sizeof k}, {&a, sizeof a}}) {
      uint64_t sz = (n + 7) / 8 * 8;
      std::memcpy(buf.data() + off, &sz, 8);
      std::memcpy(buf.data() + off + 8, p, n);
      off += 8 + sz;
    }
  }
  int buffers = 0;
  for (auto _ : state) {
    buffer_completed(nullptr, 0, buf.data(), buf.size(), off);
    if (++buffers % 64 == 0) {
      laggard::WindowSnapshot w;
      cap.close_window(w, false, [](uint32_t id) { return "section" + std::to_string(id); });
      benchmark::DoNotOptimize(w.gpu.records.size());
    }
  }
  state.SetItemsProcessed(state.iterations() * kPerBuffer);
  reset_tenancy();
}
BENCHMARK(BM_ForeignBufferReadOnItsWayBack)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
