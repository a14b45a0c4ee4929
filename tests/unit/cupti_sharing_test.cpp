// Issue 26: laggard and torch.profiler (Kineto) in one process, on the fake CUPTI
// (fake_cupti_core.h) with Kineto's real call order (fake_kineto.h). Kineto reaches CUPTI the way
// libtorch_cuda.so does when liblaggard is preloaded: through laggard's handling of another
// client's calls (shared_cupti.h; cupti_interpose.cpp does the symbol part). The contract: the
// profiler gets exactly what it gets alone; laggard gets everything it can, and counts and says
// what it misses.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "clock.h"
#include "fake_cupti_api.h"
#include "fake_kineto.h"
#include "gpu_capture.h"
#include "pause_state.h"
#include "shared_cupti.h"

namespace laggard::cupti {
namespace cupti_sharing_test {

using fake::FakeCupti;
using fake::FakeCuptiCore;
using fake::FakeKineto;
using fake::KernelSpec;
using fake::KinetoCupti;
using fake::KinetoGeneration;
using fake::KinetoOptions;

// ---- Kineto's CUPTI: the fake core's functions as plain C functions ("the real libcupti") ----
struct Real {
  static inline FakeCuptiCore* core = nullptr;
  static CUptiResult CUPTIAPI subscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) {
    return core->subscribe(s, cb, ud);
  }
  static CUptiResult CUPTIAPI unsubscribe(CUpti_SubscriberHandle s) { return core->unsubscribe(s); }
  static CUptiResult CUPTIAPI finalize() { return core->finalize(); }
  static CUptiResult CUPTIAPI register_callbacks(CUpti_BuffersCallbackRequestFunc rq,
                                                 CUpti_BuffersCallbackCompleteFunc done) {
    return core->register_buffers(rq, done);
  }
  static CUptiResult CUPTIAPI enable(CUpti_ActivityKind k) { return core->enable_kind(k); }
  static CUptiResult CUPTIAPI disable(CUpti_ActivityKind k) { return core->disable_kind(k); }
  static CUptiResult CUPTIAPI flush_all(uint32_t flag) { return core->flush_all(flag); }
  static CUptiResult CUPTIAPI timestamp_callback(CUpti_TimestampCallbackFunc fn) {
    return core->register_timestamp_callback(fn);
  }
};

// `seen`: Kineto's calls pass laggard's interposers (libtorch_cuda.so linked against libcupti,
// liblaggard preloaded); else they reach CUPTI directly (no laggard, or a static CUPTI).
KinetoCupti kineto_cupti(FakeCuptiCore& core, bool seen) {
  Real::core = &core;
  const char* lib = "libtorch_cuda.so";
  KinetoCupti c;
  c.enable_callback = [&core](uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
    return core.enable_callback(en, s, d, id);
  };
  c.get_version = [&core](uint32_t* v) { return core.get_version(v); };
  c.next_record = &FakeCuptiCore::next_record;
  if (!seen) {
    c.subscribe = &Real::subscribe;
    c.unsubscribe = &Real::unsubscribe;
    c.finalize = &Real::finalize;
    c.register_callbacks = &Real::register_callbacks;
    c.enable = &Real::enable;
    c.disable = &Real::disable;
    c.flush_all = &Real::flush_all;
    c.register_timestamp_callback = &Real::timestamp_callback;
    return c;
  }
  c.subscribe = [lib](CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) {
    return foreign::subscribe(&Real::subscribe, s, cb, ud, lib);
  };
  c.unsubscribe = [lib](CUpti_SubscriberHandle s) { return foreign::unsubscribe(&Real::unsubscribe, s, lib); };
  c.finalize = [lib] { return foreign::finalize(&Real::finalize, lib); };
  c.register_callbacks = [lib](CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc done) {
    return foreign::register_callbacks(&Real::register_callbacks, rq, done, lib);
  };
  c.enable = [lib](CUpti_ActivityKind k) { return foreign::enable(&Real::enable, k, lib); };
  c.disable = [lib](CUpti_ActivityKind k) { return foreign::disable(&Real::disable, k, lib); };
  c.flush_all = [lib](uint32_t flag) { return foreign::flush_all(&Real::flush_all, flag, lib); };
  c.register_timestamp_callback = [lib](CUpti_TimestampCallbackFunc fn) {
    return foreign::timestamp_callback(&Real::timestamp_callback, fn, lib);
  };
  return c;
}

thread_local uint32_t t_section = kNoName;
uint32_t test_section() { return t_section; }

// A training run with torch.profiler on a schedule: each cycle one warmup step, two active
// steps, one step outside the profiler; laggard (when present) ticks after every step and
// closes a window every second step.
struct Scenario {
  bool laggard = true;
  bool gpu_activities = true;  // torch.profiler(activities=[CPU, CUDA]), else [CPU]
  int cycles = 1;
  KinetoOptions kineto;
  GpuCaptureOptions options;
  uint32_t cupti_version = CUPTI_API_VERSION;
  bool partial_on_default_flush = true;
  bool incomplete_at_profiler_start = false;  // a kernel still running when the profiler starts
  std::function<void(int step, GpuCapture*)> before_step;  // pause, resume, ...
};

struct Outcome {
  // the profiler's
  uint64_t records = 0, kernels = 0, unknown_buffers = 0, declined = 0;
  bool cpu_only = false, subscribed = false;
  // laggard's, over all windows (late statistics included)
  uint64_t launched = 0, captured = 0, missed = 0, unmatched = 0, dropped = 0;
  std::vector<WindowSnapshot> windows;
};

constexpr int kKernelsPerStep = 4;  // + 1 copy + 1 set

uint64_t records_of(const WindowSnapshot& w) {
  uint64_t n = 0;
  for (const GpuKernelStats& k : w.gpu.kernels) n += k.count;
  for (const GpuLateStats& l : w.gpu.late)
    for (const GpuKernelStats& k : l.kernels) n += k.count;
  return n;
}

Outcome run(const Scenario& sc) {
  reset_tenancy();
  FakeCupti api;
  api.core.api_version = sc.cupti_version;
  api.core.partial_on_default_flush = sc.partial_on_default_flush;
  api.core.cuda_init();
  std::unique_ptr<GpuCapture> cap;
  if (sc.laggard) {
    cap = std::make_unique<GpuCapture>(api, sc.options, &test_section);
    EXPECT_EQ(cap->attach(0, AttachTrigger::later), "");
  }
  FakeKineto kineto(kineto_cupti(api.core, sc.laggard), sc.kineto);
  Outcome out;
  uint64_t index = 0;
  int step_no = 0;
  auto close = [&](bool final) {
    if (!cap) return;
    WindowSnapshot w;
    w.index = index++;
    w.end_ns = realtime_ns();
    w.start_ns = w.end_ns - 1'000'000'000;
    cap->close_window(w, final, [](uint32_t id) { return "s" + std::to_string(id); });
    out.captured += records_of(w);
    out.missed += w.gpu.missed_launches;
    out.unmatched += w.dropped.unmatched_correlation;
    out.dropped += w.dropped.cupti_records_dropped;
    out.windows.push_back(std::move(w));
  };
  auto step = [&] {
    if (sc.before_step) sc.before_step(step_no, cap.get());
    t_section = 1;
    for (int k = 0; k < kKernelsPerStep; ++k) {
      KernelSpec ks;
      ks.name = "gemm";
      api.core.launch(ks);
    }
    api.core.memcpy_async(4096);
    api.core.memset_async(512);
    t_section = kNoName;
    out.launched += kKernelsPerStep + 2;
    if (cap) cap->tick();
    if (++step_no % 2 == 0) close(false);
  };
  step();  // before the profiler
  for (int c = 0; c < sc.cycles; ++c) {
    if (sc.incomplete_at_profiler_start) {  // in laggard's buffer, which CUPTI keeps
      KernelSpec running;
      running.name = "running";
      running.incomplete = true;
      api.core.launch(running);
      out.launched += 1;
    }
    kineto.prepare(sc.gpu_activities);  // warmup
    api.core.complete_all();
    step();
    kineto.start();
    step();
    step();
    kineto.stop();
    kineto.process();
    step();  // outside the profiler
  }
  api.core.complete_all();
  close(true);
  out.records = kineto.records();
  out.kernels = kineto.kernel_records();
  out.unknown_buffers = kineto.unknown_buffers();
  out.declined = kineto.declined();
  out.cpu_only = kineto.cpu_only();
  out.subscribed = kineto.subscribed();
  return out;
}

// What the profiler got alone and with laggard, and laggard's own account (when laggard
// captured every window: not with sampling or a pause, which leave launches out on purpose).
void expect_profiler_unchanged(Scenario sc, bool laggard_captures_all = true) {
  Scenario alone = sc;
  alone.laggard = false;
  Outcome a = run(alone);
  Outcome b = run(sc);
  EXPECT_GT(a.records, 0u);
  EXPECT_EQ(b.records, a.records);
  EXPECT_EQ(b.kernels, a.kernels);
  EXPECT_EQ(b.cpu_only, a.cpu_only);
  EXPECT_EQ(b.unknown_buffers, 0u);  // no buffer of laggard's reached it
  // laggard: every launch either recorded or counted as missed, nothing lost.
  if (laggard_captures_all) {
    EXPECT_EQ(b.captured + b.missed, b.launched);
  }
  EXPECT_EQ(b.dropped, 0u);
}

TEST(CuptiSharing, LazyKinetoGetsWhatItGetsAloneAndLaggardReadsItsRecords) {
  Scenario sc;
  sc.kineto.generation = KinetoGeneration::lazy;
  expect_profiler_unchanged(sc);
  Outcome b = run(sc);
  EXPECT_EQ(b.missed, 0u);     // Kineto had kernels, copies, sets on: laggard read them
  EXPECT_EQ(b.unmatched, 0u);  // laggard kept its subscriber: every record in its section
  bool noted = false;
  for (const WindowSnapshot& w : b.windows) noted |= w.gpu.shared.find("libtorch_cuda.so held CUPTI's activity API") == 0;
  EXPECT_TRUE(noted);
}

// Item 1: Kineto before 7a3ba363 subscribes at its first use and, refused, goes CPU-only.
TEST(CuptiSharing, EagerKinetoGetsTheSubscriberLaggardHeld) {
  Scenario sc;
  sc.kineto.generation = KinetoGeneration::eager_subscribe;
  expect_profiler_unchanged(sc);
  Outcome b = run(sc);
  EXPECT_TRUE(b.subscribed);
  EXPECT_FALSE(b.cpu_only);
  EXPECT_GT(b.kernels, 0u);
  // laggard without a subscriber: its kernels are unattributed, and the windows say why.
  EXPECT_GT(b.unmatched, 0u);
  EXPECT_NE(b.windows.back().gpu.shared.find("libtorch_cuda.so held CUPTI's only subscriber"), std::string::npos)
      << b.windows.back().gpu.shared;
}

// Item 1, as it was: a Kineto laggard cannot step aside for (its calls do not pass laggard).
TEST(CuptiSharing, AnEagerKinetoLaggardDoesNotSeeIsRefusedAsWithAnyOtherSubscriber) {
  reset_tenancy();
  FakeCupti api;
  GpuCapture cap(api, {}, &test_section);
  ASSERT_EQ(cap.attach(0), "");
  KinetoOptions o;
  o.generation = KinetoGeneration::eager_subscribe;
  FakeKineto kineto(kineto_cupti(api.core, false), o);
  kineto.prepare(true);
  EXPECT_TRUE(kineto.cpu_only());
}

// Item 5: a CPU-only session (activities=[CPU]) registers Kineto's buffers but enables no kernel
// kind; laggard counts what it cannot record then and records again after.
TEST(CuptiSharing, CpuOnlySessionsCostLaggardOnlyTheirOwnStepsCounted) {
  for (KinetoGeneration gen : {KinetoGeneration::lazy, KinetoGeneration::eager_subscribe}) {
    Scenario sc;
    sc.gpu_activities = false;
    sc.cycles = 3;
    sc.kineto.generation = gen;
    expect_profiler_unchanged(sc);
    Outcome b = run(sc);
    EXPECT_EQ(b.kernels, 0u);
    EXPECT_EQ(b.missed, uint64_t(3 * 3 * (kKernelsPerStep + 2)));  // warmup + 2 active steps per cycle
    // The window after the last cycle is whole again. (Without a subscriber laggard learns of
    // launches it missed when the profiler's buffers come back: they may be counted in it.)
    const WindowSnapshot& last = b.windows.back();
    if (gen == KinetoGeneration::lazy) {
      EXPECT_EQ(last.gpu.missed_launches, 0u);
    }
    EXPECT_EQ(records_of(last), uint64_t(kKernelsPerStep + 2));
  }
}

// Items 3 and 4: twenty scheduled cycles; laggard's unsampled windows and a pause/resume in the
// middle of the profiler's cycles never switch the profiler's kinds off.
TEST(CuptiSharing, TwentyCyclesWithSamplingAndPauseLeaveTheProfilerWhole) {
  for (KinetoGeneration gen : {KinetoGeneration::lazy, KinetoGeneration::eager_subscribe}) {
    Scenario sc;
    sc.cycles = 20;
    sc.kineto.generation = gen;
    sc.options.profiling_interval = 2;
    sc.before_step = [](int step, GpuCapture* cap) {
      if (!cap || (step != 9 && step != 30)) return;  // pause during cycle 2's active steps, resume in cycle 7
      g_pause_epoch.fetch_add(1);
      cap->apply_pause();
    };
    expect_profiler_unchanged(sc, false);
    if (capture_paused()) g_pause_epoch.fetch_add(1);
  }
}

// Item 4: a kernel still running when the profiler starts keeps laggard's buffer in CUPTI;
// without routing it would reach Kineto's bufferCompleted ("unknown buffer", dropped) and never
// come back to laggard's pool: twenty cycles would take 20 of its 16 buffers.
TEST(CuptiSharing, LaggardsBufferThatCuptiKeepsComesBackToLaggard) {
  for (bool partial : {true, false}) {
    Scenario sc;
    sc.cycles = 20;
    sc.partial_on_default_flush = partial;
    sc.incomplete_at_profiler_start = true;
    sc.options.max_buffers = 4;
    expect_profiler_unchanged(sc);
    Outcome b = run(sc);
    uint64_t full = 0;
    for (const WindowSnapshot& w : b.windows) full += w.dropped.gpu_buffer_full;
    EXPECT_EQ(full, 0u);
  }
}

// Item 2 with Kineto: an old CUPTI (v26, which the fake aborts for when refused a buffer) and small
// pools on both sides: Kineto (baea3804) never refuses it either, and gets what it gets alone.
// (laggard's own refusal below v27: GpuCapture.CuptiBeforeVersion27IsNeverRefusedABuffer.)
TEST(CuptiSharing, WithAnOldCuptiTheProfilerIsWholeAndNobodyRefusesABuffer) {
  Scenario sc;
  sc.cycles = 4;
  sc.cupti_version = 26;
  sc.options.max_buffers = 1;
  sc.options.buffer_bytes = 2048;
  sc.kineto.buffer_bytes = 4096;
  expect_profiler_unchanged(sc);
}

// Recovery after a late-leaving client: Kineto with TEARDOWN_CUPTI=1 finalizes CUPTI at its next
// cycle (and subscribes again); laggard attaches again and keeps counting.
TEST(CuptiSharing, AfterAnotherClientFinalizesCuptiLaggardAttachesAgain) {
  Scenario sc;
  sc.cycles = 3;
  sc.kineto.teardown = true;
  expect_profiler_unchanged(sc);
  Outcome b = run(sc);
  bool noted = false;
  for (const WindowSnapshot& w : b.windows) noted |= w.gpu.shared.find("finalized CUPTI; laggard attached again") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_GT(records_of(b.windows.back()), 0u);
}

// A subscriber that leaves: laggard subscribes again at its next tick, and attributes again.
TEST(CuptiSharing, LaggardSubscribesAgainWhenTheOtherSubscriberLeaves) {
  reset_tenancy();
  FakeCupti api;
  GpuCapture cap(api, {}, &test_section);
  ASSERT_EQ(cap.attach(0), "");
  Real::core = &api.core;
  CUpti_SubscriberHandle theirs = nullptr;
  auto noop = [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {};
  ASSERT_EQ(foreign::subscribe(&Real::subscribe, &theirs, noop, nullptr, "nsight-lib.so"), CUPTI_SUCCESS);
  EXPECT_FALSE(cap.subscribed());
  cap.tick();
  EXPECT_FALSE(cap.subscribed());  // still theirs
  ASSERT_EQ(foreign::unsubscribe(&Real::unsubscribe, theirs, "nsight-lib.so"), CUPTI_SUCCESS);
  cap.tick();
  EXPECT_TRUE(cap.subscribed());
  t_section = 5;
  KernelSpec k;
  k.name = "k";
  api.core.launch(k);
  t_section = kNoName;
  WindowSnapshot w;
  w.index = 0;
  w.end_ns = realtime_ns();
  w.start_ns = w.end_ns - 1'000'000'000;
  cap.close_window(w, false, [](uint32_t id) { return "s" + std::to_string(id); });
  ASSERT_EQ(w.gpu.kernels.size(), 1u);
  EXPECT_EQ(w.gpu.strings.at(w.gpu.kernels[0].section), "s5");
}

// Kinds laggard did not switch on are never switched off by laggard, whoever switched them on,
// even without registering buffers (Kineto's forceLoadCupti, init.cpp: cuptiActivityEnable only).
TEST(CuptiSharing, LaggardNeverSwitchesOffAKindAnotherClientHasOn) {
  reset_tenancy();
  FakeCupti api;
  GpuCaptureOptions o;
  o.profiling_interval = 2;
  GpuCapture cap(api, o, &test_section);
  ASSERT_EQ(cap.attach(0), "");
  Real::core = &api.core;
  ASSERT_EQ(foreign::enable(&Real::enable, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "libtorch_cuda.so"), CUPTI_SUCCESS);
  WindowSnapshot w;
  w.index = 0;
  cap.close_window(w, false, [](uint32_t) { return std::string(); });  // window 1: not sampled
  EXPECT_FALSE(api.core.kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));  // laggard's alone: off
  EXPECT_TRUE(api.core.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));  // theirs: on
  g_pause_epoch.fetch_add(1);
  cap.apply_pause();
  EXPECT_TRUE(api.core.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  g_pause_epoch.fetch_add(1);
}

// Kineto's TSC timestamp callback (CuptiTimestamp.cpp) stays after the profiler stops: laggard
// measures CUPTI's clock at each window and converts.
TEST(CuptiSharing, CyclesTimestampCallbackIsDetectedThenConverted) {
  reset_tenancy();
  FakeCupti api;
  GpuCapture cap(api, {}, &test_section);
  ASSERT_EQ(cap.attach(0), "");
  uint64_t index = 0;
  auto close = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    WindowSnapshot w;
    w.index = index++;
    cap.close_window(w, false, [](uint32_t) { return std::string(); });
    return w;
  };
  WindowSnapshot w0 = close();
  EXPECT_EQ(w0.gpu.clock_problem, "");
  FakeKineto kineto(kineto_cupti(api.core, true), {});
  kineto.prepare(true);  // installs its TSC callback (2.5 cycles per ns)
  kineto.stop();
  kineto.process();
  cap.tick();
  WindowSnapshot w1 = close();
  EXPECT_NE(w1.gpu.clock_problem.find("libtorch_cuda.so"), std::string::npos) << w1.gpu.clock_problem;
  close();
  KernelSpec k;
  k.name = "k";
  k.dur_ns = 2500;  // 2500 cycles = 1 us
  api.core.launch(k);
  WindowSnapshot w3 = close();
  EXPECT_EQ(w3.gpu.clock_problem, "");
  EXPECT_NEAR(w3.gpu.clock_ticks_per_ns, 2.5, 0.01);
  ASSERT_EQ(w3.gpu.records.size(), 1u);
  EXPECT_NEAR(double(w3.gpu.records.dur_ns[0]), 1000.0, 10.0);
}

}  // namespace cupti_sharing_test
}  // namespace laggard::cupti
