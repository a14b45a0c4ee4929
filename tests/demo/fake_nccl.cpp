// laggard-fake-nccl: a CPU-only stand-in for NCCL in a synchronous data-parallel job. It loads
// the profiler plugin exactly as NCCL does (NCCL_PROFILER_PLUGIN, dlopen flags, versioned
// symbols newest first), then drives it the way NCCL 2.27-2.29 do for an AllReduce loop: API
// and group events, the collective's enqueue on the calling thread, and per-channel kernel
// events with GPU timestamps from a separate "proxy" thread. One rank can arrive late.
//
//   laggard-fake-nccl --base-ns NS [--steps N] [--step-ms MS] [--channels C]
//                     [--late-rank R --late-ms MS] [--loader 2.28|2.27.3] [--abi auto|4|5|6]
//                     [--finalize] [--gpu-skew RANK:US]... [--gpu-drift RANK:PPM]
//                     [--stale RANK:EVERY:SHIFT] [--partial RANK:EVERY] [--p2p-per-step N]
//
// Faults of real GPUs and of NCCL's proxy (issue 11), each on one rank:
//   --gpu-skew    that GPU's %globaltimer reads US microseconds ahead (may be negative)
//   --gpu-drift   that GPU's timer runs PPM parts per million fast
//   --stale       every EVERY-th op reports the GPU times of the op SHIFT away (-1: an earlier
//                 work's timestamps, as shifted ring counters give; +2: a later work's)
//   --partial     every EVERY-th op announces one channel more than report; the channels that do
//                 report ran 4 ms late (the earliest one is the one missing)
//   --p2p-per-step  Send/Recv pairs per step without channel events (an MoE all-to-all)
// NCCL_CONF_FILE (or ~/.nccl.conf, /etc/nccl.conf) is read for NCCL_PROFILER_PLUGIN as NCCL
// does (src/misc/param.cc): the environment wins, then the first definition.
//
// GPU timestamps are synthetic: step i of every rank happens at base + i * step-ms on one
// shared timeline, so ranks (separate processes started by `laggard run --nproc`) agree on
// who arrived when without talking to each other. The communicator is never destroyed unless
// --finalize: most real jobs never call ncclCommDestroy.
#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "abi_v4.h"
#include "abi_v6.h"

namespace {

namespace nabi = laggard::nccl::abi;

struct Options {
  int64_t base_ns = 0;
  int steps = 60;
  double step_ms = 4;
  int channels = 2;
  int late_rank = -1;
  double late_ms = 3;
  std::string loader = "2.28";
  std::string abi = "auto";
  bool finalize = false;
  std::vector<std::pair<int, double>> skews;  // (rank, us); repeatable
  int drift_rank = -1;
  double drift_ppm = 0;
  int stale_rank = -1, stale_every = 0, stale_shift = 0;
  int partial_rank = -1, partial_every = 0;
  int p2p_per_step = 0;
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "laggard-fake-nccl: %s\n", msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--base-ns") o.base_ns = std::atoll(next());
    else if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--step-ms") o.step_ms = std::atof(next());
    else if (a == "--channels") o.channels = std::atoi(next());
    else if (a == "--late-rank") o.late_rank = std::atoi(next());
    else if (a == "--late-ms") o.late_ms = std::atof(next());
    else if (a == "--loader") o.loader = next();
    else if (a == "--abi") o.abi = next();
    else if (a == "--finalize") o.finalize = true;
    else if (a == "--gpu-skew") {
      std::pair<int, double> sk{-1, 0};
      std::sscanf(next(), "%d:%lf", &sk.first, &sk.second);
      o.skews.push_back(sk);
    }
    else if (a == "--gpu-drift") std::sscanf(next(), "%d:%lf", &o.drift_rank, &o.drift_ppm);
    else if (a == "--stale") std::sscanf(next(), "%d:%d:%d", &o.stale_rank, &o.stale_every, &o.stale_shift);
    else if (a == "--partial") std::sscanf(next(), "%d:%d", &o.partial_rank, &o.partial_every);
    else if (a == "--p2p-per-step") o.p2p_per_step = std::atoi(next());
    else usage(("unknown option " + a).c_str());
  }
  if (!o.base_ns) usage("--base-ns is required (the shared timeline's start, epoch ns)");
  return o;
}

// NCCL's initEnv (src/misc/param.cc): KEY=VALUE lines, setenv without overwriting.
void read_nccl_conf() {
  const char* user = std::getenv("NCCL_CONF_FILE");
  const char* home = std::getenv("HOME");
  std::string files[2] = {user && *user ? user : home ? std::string(home) + "/.nccl.conf" : "", "/etc/nccl.conf"};
  for (const std::string& f : files) {
    FILE* in = f.empty() ? nullptr : std::fopen(f.c_str(), "r");
    if (!in) continue;
    char line[4096];
    while (std::fgets(line, sizeof line, in)) {
      size_t n = std::strlen(line);
      while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
      char* eq = std::strchr(line, '=');
      if (line[0] == '#' || !eq) continue;
      *eq = '\0';
      setenv(line, eq + 1, 0);
    }
    std::fclose(in);
  }
}

// NCCL's plugin_open.cc, as of the given version: which library NCCL_PROFILER_PLUGIN opens.
void* open_plugin(const std::string& loader) {
  const char* env = std::getenv("NCCL_PROFILER_PLUGIN");
  std::string name = env ? env : "";
  auto try_open = [](const std::string& n) -> void* {
    if (n.empty()) return nullptr;
    bool is_static = strncasecmp(n.c_str(), "STATIC_PLUGIN", n.size()) == 0;
    return dlopen(is_static ? nullptr : n.c_str(), RTLD_NOW | RTLD_LOCAL);
  };
  auto lib_so = [](const std::string& n) {
    return n.size() >= 7 && n.compare(0, 3, "lib") == 0 && n.compare(n.size() - 3, 3, ".so") == 0;
  };
  if (name.empty()) return try_open("libnccl-profiler.so");
  if (strcasecmp(name.c_str(), "none") == 0) return nullptr;
  if (loader == "2.27.3")  // only lib*.so is opened as given; anything else becomes a plugin name
    return try_open(lib_so(name) ? name : "libnccl-profiler-" + name + ".so");
  if (void* h = try_open(name)) return h;
  if (name.find('/') == std::string::npos && !lib_so(name)) return try_open("libnccl-profiler-" + name + ".so");
  return nullptr;
}

// Deterministic per (rank, step) noise in [0, 5 us): arrival jitter of a healthy rank.
int64_t jitter(int rank, int step) {
  uint64_t x = uint64_t(rank) * 0x9e3779b97f4a7c15ull ^ uint64_t(step) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return static_cast<int64_t>(x % 5000);
}

// The proxy thread's work: kernel channel events of one op.
struct KernelWork {
  void* op;
  uint64_t start, stop;
  int channels;
  uint64_t late_start;  // added to every reported channel's times (it ran late)
};

template <class Table, class Descr>
int drive(Table* table, const Options& o, int rank, int world, bool v5_events) {
  void* ctx = nullptr;
  int mask = 0;
  uint64_t comm_hash = 0x5eedc0ffee000000ull | uint64_t(world);
  int rc;
  if constexpr (std::is_same_v<Table, nabi::ProfilerV4>)
    rc = table->init(&ctx, &mask, "world", comm_hash, world, world, rank, nullptr);
  else
    rc = table->init(&ctx, comm_hash, &mask, "world", world, world, rank, nullptr);
  std::printf("rank %d: plugin '%s' init rc=%d mask=0x%x context=%s\n", rank, table->name, rc, mask,
              ctx ? "set" : "null");
  if (!mask) return 0;
  const bool kernel_events = mask & nabi::kKernelCh;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<KernelWork> queue;
  bool done = false;
  std::thread proxy([&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return done || !queue.empty(); });
      if (queue.empty()) return;
      KernelWork w = queue.front();
      queue.pop_front();
      lock.unlock();
      for (int c = 0; c < w.channels; ++c) {
        Descr k{};
        k.type = nabi::kKernelCh;
        k.parentObj = w.op;
        k.kernelCh.channelId = static_cast<uint8_t>(c);
        k.kernelCh.pTimer = w.start + w.late_start + c * 40;
        void* h = nullptr;
        table->startEvent(ctx, &h, &k);
        if (!h) continue;
        nabi::StateArgs a{};
        a.kernelCh.pTimer = w.stop + w.late_start - c * 40;
        table->recordEventState(h, nabi::kStateKernelChStop, &a);
        table->stopEvent(h);
      }
      lock.lock();
    }
  });

  const int64_t step_ns = static_cast<int64_t>(o.step_ms * 1e6);
  const int64_t late_ns = static_cast<int64_t>(o.late_ms * 1e6);
  // This GPU's clock: skewed and drifting against the shared timeline.
  auto gpu_clock = [&](int64_t t) -> uint64_t {
    double v = double(t);
    for (const auto& [r, us] : o.skews)
      if (r == rank) v += us * 1000;
    if (rank == o.drift_rank) v += double(t - o.base_ns) * o.drift_ppm * 1e-6;
    return static_cast<uint64_t>(v);
  };
  // The shared timeline of step i on this rank: arrival and end.
  const bool anyone_late = o.late_rank >= 0 && o.late_rank < world;
  auto arrive_at = [&](int i) {
    return o.base_ns + int64_t(i) * step_ns + jitter(rank, i) + (rank == o.late_rank ? late_ns : 0);
  };
  auto end_at = [&](int i) {
    return o.base_ns + int64_t(i) * step_ns + (anyone_late ? late_ns : 0) + 5000 + 300'000 + jitter(rank + 100, i) / 10;
  };
  // Paced against the loop's start, not step by step: the GPU times above follow a fixed
  // timeline, as a real GPU's follow the host that launches its kernels. Relative sleeps let a
  // host hiccup (milliseconds under ASan on a loaded machine) shift every later callback
  // against that timeline: a step in the proxy's apparent lag, which with the proxy thread's
  // slow start made prompt ops look 'after_callback' (NcclEndToEnd tests lost 2 of 60 ops).
  const auto loop_start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    std::this_thread::sleep_until(loop_start + std::chrono::microseconds(static_cast<int64_t>(o.step_ms * 1000 * (i + 1))));
    void* api = nullptr;
    if constexpr (!std::is_same_v<Descr, nabi::DescrV4>) {
      Descr g{};
      g.type = nabi::kGroupApi;
      table->startEvent(ctx, &api, &g);
      table->recordEventState(api, 23, nullptr);
      table->recordEventState(api, 24, nullptr);
    }
    Descr group{};
    group.type = nabi::kGroup;
    void* group_handle = nullptr;
    table->startEvent(ctx, &group_handle, &group);
    Descr d{};
    d.type = nabi::kColl;
    d.parentObj = group_handle;
    d.rank = rank;
    d.coll.seqNumber = static_cast<uint64_t>(i);
    d.coll.func = "AllReduce";
    d.coll.count = 1 << 20;
    d.coll.root = 0;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = static_cast<uint8_t>(o.channels);  // partial ops: one of them never reports
    d.coll.nWarps = 16;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* op = nullptr;
    // NCCL 2.27 (v4) starts collectives only under a non-null group handle.
    if (v5_events || group_handle) table->startEvent(ctx, &op, &d);
    void* send = nullptr;
    if (i % 10 == 0) {  // a pipeline-style send to the next rank now and then
      Descr p{};
      p.type = nabi::kP2p;
      p.parentObj = group_handle;
      p.rank = rank;
      p.p2p.func = "Send";
      p.p2p.datatype = "ncclFloat32";
      p.p2p.count = 4096;
      p.p2p.peer = (rank + 1) % world;
      p.p2p.nChannels = 1;
      table->startEvent(ctx, &send, &p);
    }
    std::vector<void*> flood;
    for (int k = 0; k < o.p2p_per_step; ++k)  // all-to-all: a send and a receive per peer
      for (const char* func : {"Send", "Recv"}) {
        Descr p{};
        p.type = nabi::kP2p;
        p.parentObj = group_handle;
        p.rank = rank;
        p.p2p.func = func;
        p.p2p.datatype = "ncclBfloat16";
        p.p2p.count = 1024;
        p.p2p.peer = k % world;
        p.p2p.nChannels = 1;
        void* h = nullptr;
        table->startEvent(ctx, &h, &p);
        if (h) flood.push_back(h);
      }
    if (op) table->stopEvent(op);
    if (send) table->stopEvent(send);
    for (void* h : flood) table->stopEvent(h);
    if (group_handle) table->stopEvent(group_handle);
    if (api) table->stopEvent(api);

    int times_of = i;  // whose GPU times this op reports
    // (Only work that exists: the first op has no earlier one, the last no later one.)
    if (rank == o.stale_rank && o.stale_every > 0 && i % o.stale_every == o.stale_every - 1 && i + o.stale_shift >= 0 &&
        i + o.stale_shift < o.steps)
      times_of = i + o.stale_shift;
    const bool partial = rank == o.partial_rank && o.partial_every > 0 && i % o.partial_every == o.partial_every - 1;
    const uint64_t arrive = gpu_clock(arrive_at(times_of)), end = gpu_clock(end_at(times_of));
    if (!kernel_events) continue;
    std::lock_guard<std::mutex> lock(mu);
    if (op)
      queue.push_back({op, arrive, end, partial ? o.channels - 1 : o.channels, partial ? uint64_t{4'000'000} : 0});
    if (send) queue.push_back({send, arrive, arrive + 20'000, 1, 0});
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_one();
  }
  proxy.join();
  if (o.finalize) table->finalize(ctx);
  std::printf("rank %d: %d steps done\n", rank, o.steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  const char* r = std::getenv("RANK");
  const char* w = std::getenv("WORLD_SIZE");
  int rank = r ? std::atoi(r) : 0, world = w ? std::atoi(w) : 1;
  read_nccl_conf();
  void* lib = open_plugin(o.loader);
  const char* env = std::getenv("NCCL_PROFILER_PLUGIN");
  if (!lib) {
    std::printf("rank %d: no profiler plugin (NCCL_PROFILER_PLUGIN=%s)\n", rank, env ? env : "(unset)");
    return 0;
  }
  // Newest interface first, as NCCL 2.29 does (2.28 starts at v5, 2.27 at v4).
  void* v6 = o.abi == "auto" || o.abi == "6" ? dlsym(lib, "ncclProfiler_v6") : nullptr;
  void* v5 = o.abi == "auto" || o.abi == "5" ? dlsym(lib, "ncclProfiler_v5") : nullptr;
  void* v4 = o.abi == "auto" || o.abi == "4" ? dlsym(lib, "ncclProfiler_v4") : nullptr;
  if (v6) return drive<nabi::ProfilerV6, nabi::DescrV6>(static_cast<nabi::ProfilerV6*>(v6), o, rank, world, true);
  if (v5) return drive<nabi::ProfilerV5, nabi::DescrV5>(static_cast<nabi::ProfilerV5*>(v5), o, rank, world, true);
  if (v4) return drive<nabi::ProfilerV4, nabi::DescrV4>(static_cast<nabi::ProfilerV4*>(v4), o, rank, world, false);
  std::printf("rank %d: plugin has no ncclProfiler_v4/v5/v6 table\n", rank);
  return 0;
}
