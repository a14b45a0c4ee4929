#include "fork_gate.h"

#include <pthread.h>
#include <time.h>

#include <atomic>

#include "clock.h"

namespace laggard {
namespace {

// Dekker-style: a gate counts itself in, then looks for a fork; a fork marks itself, then looks
// for gates. Both with sequentially consistent atomics, so at least one of them sees the other.
std::atomic<int> g_open_gates{0};
std::atomic<bool> g_fork_preparing{false};
std::atomic<long> g_waited{0}, g_gave_up{0};
// Gates this thread holds (its nested gates do not wait), whether it counts one of them in
// g_open_gates (a fork it makes itself, from a signal handler that interrupted a gate, does not wait
// for its own), and whether it is forking (a fork handler of another library's that runs after ours
// and opens a gate must not wait for the fork it is part of).
thread_local int t_gates_held __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_counted __attribute__((tls_model("initial-exec"))) = false;
thread_local bool t_forking __attribute__((tls_model("initial-exec"))) = false;

void pause_briefly() {
  const timespec step{0, 100'000};
  nanosleep(&step, nullptr);
}

int own_gates() { return t_counted ? 1 : 0; }

void before_fork() {
  t_forking = true;
  g_fork_preparing.store(true);
  if (g_open_gates.load() == own_gates()) return;
  g_waited.fetch_add(1, std::memory_order_relaxed);
  const int64_t deadline = mono_ns() + kForkWaitLimitNs;
  while (g_open_gates.load() != own_gates()) {
    if (mono_ns() > deadline) {
      g_gave_up.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    pause_briefly();
  }
}

void after_fork_in_parent() {
  g_fork_preparing.store(false);
  t_forking = false;
}

void after_fork_in_child() {
  g_open_gates.store(own_gates());  // the other holders are not in the child
  g_fork_preparing.store(false);
  t_forking = false;
}

// At load, when the process has one thread, as every fork handler of laggard's.
[[gnu::constructor]] void install_fork_gate() {
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

}  // namespace

ForkGate::ForkGate() : counted_(t_gates_held++ == 0 && !t_forking) {
  if (!counted_) return;
  for (;;) {
    g_open_gates.fetch_add(1);
    if (!g_fork_preparing.load()) break;
    g_open_gates.fetch_sub(1);  // a fork is copying the process: let it finish first
    while (g_fork_preparing.load()) pause_briefly();
  }
  t_counted = true;
}

ForkGate::~ForkGate() {
  --t_gates_held;
  if (!counted_) return;
  t_counted = false;
  g_open_gates.fetch_sub(1);
}

void* load_library(const char* path, int flags) {
  ForkGate gate;
  return dlopen(path, flags);
}

void release_dl_error_state() {
  for (int i = 0; i < 2 && dlerror() != nullptr; ++i) {
  }
}

ForkGateCounts fork_gate_counts() { return {g_waited.load(), g_gave_up.load()}; }

}  // namespace laggard
