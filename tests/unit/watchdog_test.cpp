// The hang watchdog's parts in-process: when a report is due, its settings, and capturing other
// threads' stacks with a signal (including threads that block it and apps that own signals).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <cstddef>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "name_table.h"
#include "range_stack.h"
#include "refuse_syscall.h"
#include "remote_unwind.h"
#include "stack_sampler.h"
#include "thread_probe.h"
#include "thread_registry.h"
#include "watchdog.h"

namespace laggard::watch {
namespace watchdog_test {

constexpr int64_t kS = 1'000'000'000;

// ThreadSanitizer defers an asynchronous signal to the thread's next intercepted call and hands
// the handler the context of its arrival, whose stack has been reused since: frames taken from
// it are not the thread's. Checks of signal-path frames are skipped under it.
#if defined(__SANITIZE_THREAD__)
constexpr bool kSignalContextIsCurrent = false;
#else
constexpr bool kSignalContextIsCurrent = true;
#endif

#if defined(__x86_64__)
// Code bytes at chosen addresses, as the unwinder reads them from the modules.
struct FakeCode {
  std::map<uint64_t, uint8_t> bytes;
  void put(uint64_t at, std::initializer_list<uint8_t> b) {
    for (uint8_t v : b) bytes[at++] = v;
  }
  void call_rel32(uint64_t ret, uint64_t target) {  // the 8 bytes before ret end in call target
    const auto rel = static_cast<uint32_t>(target - ret);
    put(ret - 8, {0x90, 0x90, 0x90, 0xE8, uint8_t(rel), uint8_t(rel >> 8), uint8_t(rel >> 16), uint8_t(rel >> 24)});
  }
  bool read(uint64_t at, uint8_t* out, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      auto it = bytes.find(at + i);
      if (it == bytes.end()) return false;
      out[i] = it->second;
    }
    return true;
  }
};

// A stack the thread was read in place from: `stuck` is the function it blocks in (its frame
// needs %rbp, which /proc/self/task/TID/syscall does not give). Below the stuck frame's own
// record (its caller's call into it) lies a stale record of a call it made earlier.
struct StaleAndRealRecords {
  static constexpr uint64_t kStuck = 0x3000, kOther = 0x5000, kStaleRet = 0x1105, kRealRet = 0x2205;
  uint8_t bytes[512] = {};
  StackSnapshot s;
  FakeCode code;
  StaleAndRealRecords() {
    s.stack = bytes;
    s.stack_start = 0x7000'0000;
    s.stack_len = sizeof bytes;
    record(0x40, s.stack_start + 0x100, kStaleRet);  // saved fp, then the return address
    record(0x80, s.stack_start + 0x1c0, kRealRet);
    code.call_rel32(kStaleRet, kOther);
  }
  void record(size_t at, uint64_t fp, uint64_t ret) {
    std::memcpy(bytes + at, &fp, 8);
    std::memcpy(bytes + at + 8, &ret, 8);
  }
  FrameRecord find(bool check_callers) const {
    auto read = [&](uint64_t at, uint8_t* out, size_t n) { return code.read(at, out, n); };
    return find_frame_record(
        s, s.stack_start, [](uint64_t pc) { return pc >= 0x1000 && pc < 0x10000; }, read,
        [&](uint64_t ret, const uint8_t* before) {  // as RemoteUnwinder's, checked against kStuck
          return check_callers ? call_went_to(before, ret, kStuck, read) : CallerMatch::unknown;
        });
  }
};

TEST(FrameRecord, TheStuckFunctionsCallerIsChosenOverAStaleRecordBelowIt) {
  StaleAndRealRecords st;
  st.code.call_rel32(st.kRealRet, st.kStuck);
  EXPECT_EQ(st.find(false).return_address, st.kStaleRet);  // the first record up from sp: the stale one
  FrameRecord r = st.find(true);
  EXPECT_EQ(r.return_address, st.kRealRet);
  EXPECT_EQ(r.at, st.s.stack_start + 0x80);
  EXPECT_EQ(r.saved_fp, st.s.stack_start + 0x1c0);
}

TEST(FrameRecord, ACallThroughAPltStubWhoseSlotHoldsTheStuckFunctionCounts) {
  for (bool endbr : {false, true}) {
    StaleAndRealRecords st;
    constexpr uint64_t kStub = 0x4000, kSlot = 0x6008;
    st.code.call_rel32(st.kRealRet, kStub);
    const uint64_t after = kStub + (endbr ? 4 : 0) + 7;  // jmp *disp(%rip) with a bnd prefix
    const auto disp = static_cast<uint32_t>(kSlot - after);
    if (endbr) st.code.put(kStub, {0xF3, 0x0F, 0x1E, 0xFA});
    st.code.put(kStub + (endbr ? 4 : 0), {0xF2, 0xFF, 0x25, uint8_t(disp), uint8_t(disp >> 8), uint8_t(disp >> 16),
                                          uint8_t(disp >> 24), 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90});
    st.code.put(kSlot, {0x00, 0x30, 0, 0, 0, 0, 0, 0});  // bound to 0x3000
    EXPECT_EQ(plt_stub_slot(std::vector<uint8_t>(16, 0x90).data(), kStub), 0u);
    EXPECT_EQ(st.find(true).return_address, st.kRealRet) << endbr;
  }
}

TEST(FrameRecord, WithNothingToCheckTheFirstRecordIsKeptAsBefore) {
  StaleAndRealRecords st;
  st.code.put(st.kRealRet - 8, {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0xD0});  // call *%rax
  // An indirect call cannot be checked: it beats the stale record, whose call provably went elsewhere.
  EXPECT_EQ(st.find(true).return_address, st.kRealRet);
  // A record of a call elsewhere is still taken when no other is found (a tail call into the stuck function).
  st.code.call_rel32(st.kRealRet, 0x5500);
  EXPECT_EQ(st.find(true).return_address, st.kStaleRet);
}
#endif

TEST(StallClock, ReportsAfterHangThenAtMostEveryRepeat) {
  StallClock c(10 * kS, 30 * kS, 0);
  EXPECT_FALSE(c.due(5, 0));
  EXPECT_FALSE(c.due(5, 9 * kS));
  EXPECT_TRUE(c.due(5, 10 * kS));
  EXPECT_FALSE(c.due(5, 20 * kS));  // repeat not yet due
  EXPECT_FALSE(c.due(5, 39 * kS));
  EXPECT_TRUE(c.due(5, 40 * kS));
  EXPECT_EQ(c.last_progress_mono(), 0);
}

TEST(StallClock, ProgressRestartsTheCountAndANewStallReportsAgain) {
  StallClock c(10 * kS, 300 * kS, 0);
  EXPECT_FALSE(c.due(1, 0));
  EXPECT_TRUE(c.due(1, 10 * kS));
  EXPECT_FALSE(c.due(2, 11 * kS));  // progress
  EXPECT_FALSE(c.due(2, 20 * kS));
  EXPECT_TRUE(c.due(2, 21 * kS));   // a new stall: no need to wait for the repeat interval
  EXPECT_EQ(c.last_progress_mono(), 11 * kS);
}

TEST(StallClock, LongSectionWithNestedProgressNeverReports) {
  StallClock c(1 * kS, 300 * kS, 0);
  for (int64_t t = 0, p = 0; t < 60 * kS; t += kS / 2, ++p) EXPECT_FALSE(c.due(p, t));
}

TEST(HangConfig, OffByDefaultAndBadValuesWarn) {
  std::vector<std::string> w;
  HangConfig c = parse_hang_config(map_env({}), &w);
  EXPECT_EQ(c.hang_s, 0);
  EXPECT_TRUE(w.empty());
  c = parse_hang_config(map_env({{"LAGGARD_HANG_S", "300"}, {"LAGGARD_HANG_REPEAT_S", "60"}}), &w);
  EXPECT_EQ(c.hang_s, 300);
  EXPECT_EQ(c.repeat_s, 60);
  c = parse_hang_config(map_env({{"LAGGARD_HANG_S", "soon"}, {"LAGGARD_HANG_SIGNAL", "9"}}), &w);
  EXPECT_EQ(c.hang_s, 0);
  EXPECT_EQ(c.signal, 0);  // SIGKILL is no real-time signal
  EXPECT_EQ(w.size(), 2u);
}

// A thread parked in a function with a name, inside an NVTX-like range, until told to go:
// blocked in poll on a pipe (in the kernel: read in place) or spinning (running: signalled).
struct Parked {
  Parked() { pipe2(wake, O_CLOEXEC); }
  ~Parked() {
    close(wake[0]);
    close(wake[1]);
  }
  int wake[2] = {-1, -1};
  std::atomic<bool> go{false};
  std::atomic<uint32_t> tid{0};
  std::atomic<uint64_t> spins{0};
  bool block_signals = false;
  bool spin = false;
  NameTable names{"", 16};
  std::thread thread;

  void start() {
    thread = std::thread([this] { body(); });
    while (!tid.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void stop() {
    go.store(true);
    (void)!write(wake[1], "x", 1);
    thread.join();
  }
  __attribute__((noinline)) void parked_in_named_function() {
    if (spin)  // in and out of malloc, as a busy application thread is (ThreadSanitizer also
               // delivers a signal only at an intercepted call such as malloc)
      while (!go.load(std::memory_order_relaxed)) {
        void* p = std::malloc(64);
        asm volatile("" : : "r"(p) : "memory");
        std::free(p);
        spins.fetch_add(1, std::memory_order_relaxed);
      }
    else
      while (!go.load()) {
        pollfd fd{wake[0], POLLIN, 0};
        poll(&fd, 1, 60'000);
      }
    asm volatile("");
  }
  void body() {
    if (block_signals) {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, nullptr);
    }
    RangeStack stack;
    stack.push(names.intern(nullptr, "", "data_load"), nullptr, 1);
    uint32_t me = static_cast<uint32_t>(syscall(SYS_gettid));
    ThreadSlot* slot = claim_slot(me, &stack);
    tid.store(me);
    parked_in_named_function();
    release_slot(slot);
  }
};

bool has_frame(const ThreadReport& t, const std::string& part) {
  for (const StackFrame& f : t.frames)
    if (f.symbol.find(part) != std::string::npos) return true;
  return false;
}

// The frames as "symbol (module)" lines, for failure messages.
std::string frames_of(const ThreadReport& t) {
  std::string s;
  for (const StackFrame& f : t.frames) s += "  " + f.symbol + " (" + f.module + ")\n";
  return s;
}

std::atomic<int> g_app_handler_runs{0};
void app_handler(int) { g_app_handler_runs.fetch_add(1); }

// One sampler for the whole process, as in liblaggard (its handler is process-wide).
StackSampler& sampler() {
  static StackSampler* s = [] {
    // The app owns the signal laggard would try first: laggard must pick another.
    struct sigaction sa {};
    sa.sa_handler = app_handler;
    sigaction(SIGRTMAX - 2, &sa, nullptr);
    auto* p = new StackSampler();
    p->arm(0, 0);
    return p;
  }();
  return *s;
}

// One thread's stack as a report takes it: modules read, stack copied, frames named.
ThreadReport take_stack(uint32_t tid) {
  ThreadReport t;
  t.tid = tid;
  sampler().begin_report();
  sampler().capture(t, 2 * kS);
  sampler().name_frames(t.frames);
  return t;
}

TEST(StackSampler, CapturesAnotherThreadsStackAndOpenSections) {
  Parked p;
  p.start();
  ThreadReport t = take_stack(p.tid.load());
  p.stop();
  ASSERT_EQ(sampler().unwinder(), "libunwind");
  EXPECT_EQ(t.status, "captured");
  EXPECT_TRUE(has_frame(t, "parked_in_named_function")) << frames_of(t);
  ASSERT_EQ(t.sections.size(), 1u);
  EXPECT_EQ(t.sections[0].name, "data_load");
}

TEST(StackSampler, AvoidsSignalsTheAppHandlesAndNeverRunsTheirHandlers) {
  Parked p;
  p.spin = true;  // running: only a signal can take its stack
  p.start();
  ThreadReport t;
  t.tid = p.tid.load();
  sampler().begin_report();
  sampler().capture(t, 2 * kS);
  EXPECT_NE(sampler().signal(), SIGRTMAX - 2);
  // Now the app takes the signal laggard chose, after laggard installed its handler.
  int taken = sampler().signal();
  struct sigaction sa {};
  sa.sa_handler = app_handler;
  sigaction(taken, &sa, nullptr);
  ThreadReport again;
  again.tid = p.tid.load();
  sampler().capture(again, 2 * kS);
  p.stop();
  EXPECT_EQ(again.status, "captured");
  EXPECT_NE(sampler().signal(), taken);
  EXPECT_EQ(g_app_handler_runs.load(), 0);
  struct sigaction now {};
  sigaction(taken, nullptr, &now);
  EXPECT_EQ(now.sa_handler, app_handler);  // left as the app set it
}

TEST(StackSampler, ThreadThatBlocksSignalsIsReportedNotWaitedFor) {
  Parked p;
  p.block_signals = true;
  p.spin = true;  // running with the signal blocked: nothing can be read
  p.start();
  ThreadReport t;
  t.tid = p.tid.load();
  auto t0 = std::chrono::steady_clock::now();
  sampler().capture(t, 2 * kS);
  auto took = std::chrono::steady_clock::now() - t0;
  p.stop();
  EXPECT_EQ(t.status, "blocked");
  EXPECT_TRUE(t.frames.empty());
  EXPECT_LT(took, std::chrono::seconds(1));
}

TEST(StackSampler, ASleepingThreadThatBlocksSignalsIsReadInPlace) {
  Parked p;
  p.block_signals = true;  // blocked in nanosleep: no signal is needed to read it
  p.start();
  ThreadReport t = take_stack(p.tid.load());
  p.stop();
  EXPECT_EQ(t.status, "captured");
  EXPECT_EQ(t.method, "in_place");
  EXPECT_TRUE(has_frame(t, "parked_in_named_function")) << frames_of(t);
  ASSERT_EQ(t.sections.size(), 1u);
  EXPECT_EQ(t.sections[0].name, "data_load");
}

// Issue 24, item 5: a thread waiting in poll (as in select, epoll_wait, nanosleep or a recv
// with a timeout) is never signalled, so its wait is never cut short with EINTR: its stack is
// read in place while it stays blocked.
TEST(StackSampler, AThreadWaitingInPollIsReadInPlaceAndNeverSeesEintr) {
  int wake[2];
  ASSERT_EQ(pipe2(wake, O_CLOEXEC), 0);
  std::atomic<uint32_t> tid{0};
  std::atomic<int> eintr{0}, polls{0};
  std::thread waiter([&] {
    tid.store(static_cast<uint32_t>(syscall(SYS_gettid)));
    for (;;) {
      pollfd fd{wake[0], POLLIN, 0};
      int rc = poll(&fd, 1, 60'000);
      polls.fetch_add(1);
      if (rc < 0 && errno == EINTR) eintr.fetch_add(1);
      if (rc != 0 && !(rc < 0 && errno == EINTR)) break;  // woken through the pipe
    }
  });
  while (!tid.load() || read_syscall_state(tid.load()).running || !read_syscall_state(tid.load()).ok)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 0; i < 5; ++i) {
    ThreadReport t = take_stack(tid.load());
    EXPECT_EQ(t.status, "captured");
    EXPECT_EQ(t.method, "in_place");
    EXPECT_GE(t.frames.size(), 2u);  // poll, and the lambda that called it
  }
  ASSERT_EQ(write(wake[1], "x", 1), 1);
  waiter.join();
  close(wake[0]);
  close(wake[1]);
  EXPECT_EQ(eintr.load(), 0);
  EXPECT_EQ(polls.load(), 1);  // one poll, never cut short
}

// Issue 24, item 1: the signal handler never calls into the loader. A running thread is
// captured while another thread sits inside dl_iterate_phdr holding the loader's lock (as a
// dlclose, a C++ throw's unwinder or a profiler does); with libunwind's unw_step in the handler
// the sampled thread waited for that lock inside the handler, and a thread of the application
// holding what the lock holder needed (a malloc arena) deadlocked the process for good.
struct LoaderHolder {
  std::atomic<bool> inside{false}, release{false};
};
int hold_the_loader(dl_phdr_info*, size_t, void* arg) {
  auto* h = static_cast<LoaderHolder*>(arg);
  h->inside.store(true);
  while (!h->release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 1;
}

TEST(StackSampler, ARunningThreadIsCapturedWhileAnotherHoldsTheLoaderLock) {
  sampler();  // armed first, as the watchdog thread does when it starts: dlopen takes the lock
  Parked spinner;
  spinner.spin = true;
  spinner.start();
  LoaderHolder h;
  std::thread holder([&] { dl_iterate_phdr(hold_the_loader, &h); });
  while (!h.inside.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ThreadReport t;
  t.tid = spinner.tid.load();
  sampler().begin_report();
  sampler().capture(t, 2 * kS);
  // The sampled thread runs on while the lock is still held: it is not stuck in a handler.
  uint64_t before = spinner.spins.load();
  bool ran_on = false;
  for (int i = 0; i < 10000 && !ran_on; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ran_on = spinner.spins.load() > before;
  }
  h.release.store(true);
  holder.join();
  sampler().name_frames(t.frames);  // naming reads symbol tables through the loader: after
  spinner.stop();
  EXPECT_EQ(t.status, "captured");
  EXPECT_EQ(t.method, "signal");
  EXPECT_TRUE(ran_on);
  if (!kSignalContextIsCurrent) GTEST_SKIP() << "ThreadSanitizer delivers signals late: the context is stale";
  EXPECT_TRUE(has_frame(t, "parked_in_named_function")) << frames_of(t);
}

// A container whose seccomp profile refuses process_vm_readv (and ptrace): stacks are read
// through /proc/self/mem instead, in a child process with such a filter installed.
TEST(StackSampler, WithoutProcessVmReadvStacksComeThroughProcSelfMem) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!test::refuse_syscall(SYS_process_vm_readv, EPERM)) _exit(2);
    uint64_t x = 1, y = 0;
    iovec l{&y, sizeof y}, r{&x, sizeof x};
    if (syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0) != -1) _exit(3);  // the filter works
    StackSampler s;
    s.arm(0, 0);
    Parked p;
    p.start();
    ThreadReport t;
    t.tid = p.tid.load();
    s.begin_report();
    s.capture(t, 2 * kS);
    s.name_frames(t.frames);
    p.stop();
    _exit(t.method == "in_place" && has_frame(t, "parked_in_named_function") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);  // 1: no frames, 2/3: no seccomp here
}

TEST(Watchdog, WritesAReportNamingEveryThread) {
  Parked p;
  p.start();
  std::string dir = std::filesystem::temp_directory_path() / ("laggard-watchdog-" + std::to_string(getpid()));
  RankInfo ri;
  ri.run_dir = dir;
  ri.run_id = "r";
  ri.rank = 3;
  ri.world_size = 4;
  ri.pid = getpid();
  HangConfig cfg;
  cfg.hang_s = 1;
  Watchdog w(cfg, ri, 0);
  HangReport r = w.build_report(5 * kS);
  ASSERT_EQ(w.write(r), "");
  p.stop();
  std::ifstream in(dir + "/" + hang_report_name(3, getpid(), "", 0));
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(j["schema"], "laggard-hang");
  EXPECT_EQ(j["rank"], 3);
  bool found = false;
  for (const auto& t : j["threads"])
    if (t["tid"] == p.tid.load()) {
      found = true;
      ASSERT_EQ(t["status"], "captured");  // the checks below read its frames and sections
      EXPECT_EQ(t["sections"][0]["name"], "data_load");
    }
  EXPECT_TRUE(found);
  EXPECT_TRUE(j["python"].is_null());
}

}  // namespace
}  // namespace laggard::watch
