// laggard-hang-demo: a CPU-only job in which one rank stops, for the hang watchdog's tests.
//
//   laggard-hang-demo [--stuck-rank R] [--hold-s S] [--healthy-s S] [--app-rt-handler]
//                     [--blocked-thread]
//
// Every rank runs a few quick steps ("step" > "data_load" / "allreduce"). Then the stuck rank
// deadlocks inside "data_load" in load_batch() (it takes a mutex its own helper thread holds)
// while the others wait in "allreduce" in wait_for_peers() for a flag file the stuck rank
// never writes. Both give up after --hold-s so the test ends by itself.
// --healthy-s S instead runs one long "epoch" range of S seconds made of short nested steps:
// long, but progressing, so no hang report may appear.
// --app-rt-handler: the app installs its own handler on the real-time signals laggard would
// try first (SIGRTMAX-2, SIGRTMAX-3); --blocked-thread: a helper thread blocks every signal.
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

struct Options {
  int stuck_rank = -1;
  double hold_s = 4;
  double healthy_s = 0;
  bool app_rt_handler = false;
  bool blocked_thread = false;
};

std::atomic<int> g_app_signals{0};
void app_handler(int) { g_app_signals.fetch_add(1); }

pthread_mutex_t g_batch_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_stop{false};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// The deadlock: the mutex is held by the prefetch thread, which never lets go.
__attribute__((noinline)) void load_batch(double hold_s) {
  timespec until{};
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += static_cast<time_t>(hold_s);
  if (pthread_mutex_timedlock(&g_batch_mu, &until) == 0) pthread_mutex_unlock(&g_batch_mu);
}

__attribute__((noinline)) void wait_for_peers(const std::string& flag, double hold_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(hold_s);
  while (std::chrono::steady_clock::now() < until && access(flag.c_str(), F_OK) != 0) sleep_s(0.01);
}

void quick_steps(int n) {
  for (int i = 0; i < n; ++i) {
    nvtxRangePushA("step");
    nvtxRangePushA("data_load");
    sleep_s(0.005);
    nvtxRangePop();
    nvtxRangePushA("allreduce");
    sleep_s(0.005);
    nvtxRangePop();
    nvtxRangePop();
  }
}

void healthy(double seconds) {
  nvtxRangePushA("epoch");
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) quick_steps(1);
  nvtxRangePop();
}

void stalled(int rank, const Options& o) {
  nvtxRangePushA("step");
  if (rank == o.stuck_rank) {
    nvtxRangePushA("data_load");
    load_batch(o.hold_s);
  } else {
    nvtxRangePushA("allreduce");
    wait_for_peers("/nonexistent/laggard-hang-demo-flag", o.hold_s);
  }
  nvtxRangePop();
  nvtxRangePop();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "missing value\n"), std::exit(2), argv[0]); };
    if (a == "--stuck-rank") o.stuck_rank = std::atoi(next());
    else if (a == "--hold-s") o.hold_s = std::atof(next());
    else if (a == "--healthy-s") o.healthy_s = std::atof(next());
    else if (a == "--app-rt-handler") o.app_rt_handler = true;
    else if (a == "--blocked-thread") o.blocked_thread = true;
    else return std::fprintf(stderr, "laggard-hang-demo: unknown option %s\n", a.c_str()), 2;
  }
  const int rank = env_int("RANK", 0);
  if (o.app_rt_handler)
    for (int sig : {SIGRTMAX - 2, SIGRTMAX - 3}) {
      struct sigaction sa {};
      sa.sa_handler = app_handler;
      sigemptyset(&sa.sa_mask);
      sigaction(sig, &sa, nullptr);
    }
  std::thread blocked;
  if (o.blocked_thread)
    blocked = std::thread([] {
      pthread_setname_np(pthread_self(), "sigblocked");
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, nullptr);
      while (!g_stop.load()) sleep_s(0.01);
    });
  std::thread prefetch([&] {
    pthread_setname_np(pthread_self(), "prefetch");
    if (rank == o.stuck_rank) pthread_mutex_lock(&g_batch_mu);  // and never unlocks until the end
    while (!g_stop.load()) sleep_s(0.01);
    if (rank == o.stuck_rank) pthread_mutex_unlock(&g_batch_mu);
  });
  sleep_s(0.05);

  quick_steps(5);
  if (o.healthy_s > 0) healthy(o.healthy_s);
  else stalled(rank, o);
  quick_steps(2);

  g_stop.store(true);
  prefetch.join();
  if (blocked.joinable()) blocked.join();
  if (g_app_signals.load() != 0) {
    std::fprintf(stderr, "laggard-hang-demo: the app's own real-time handler ran %d times\n", g_app_signals.load());
    return 4;
  }
  return 0;
}
