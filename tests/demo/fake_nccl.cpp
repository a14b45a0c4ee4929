// laggard-fake-nccl: a CPU-only stand-in for NCCL in a synchronous job. It loads the profiler
// plugin exactly as NCCL does (NCCL_PROFILER_PLUGIN, dlopen flags, versioned symbols newest
// first), then drives it the way NCCL 2.27-2.30 do: API and group events and the collective's
// start/stop on the calling thread, per-channel kernel events with GPU timestamps from a
// separate "proxy" thread, called back when the GPU wrote them (on CLOCK_REALTIME, the shared
// timeline below). One rank can arrive late.
//
//   laggard-fake-nccl --base-ns NS [--steps N] [--step-ms MS] [--channels C]
//                     [--late-rank R --late-ms MS] [--loader 2.28|2.27.3] [--abi auto|4|5|6]
//                     [--finalize] [--gpu-skew RANK:US]... [--gpu-drift RANK:PPM]
//                     [--stale RANK:EVERY:SHIFT] [--partial RANK:EVERY] [--p2p-per-step N]
//                     [--group N] [--bcast EVERY:ROOTS[:CHANNELS]] [--gpu-lag MS] [--late-end RANK:US]
//                     [--pipeline] [--comm-restarts N] [--gpus-per-process G]
//
// Faults of real GPUs and of NCCL's proxy (issue 11), each on one rank:
//   --gpu-skew    that GPU's %globaltimer reads US microseconds ahead (may be negative)
//   --gpu-drift   that GPU's timer runs PPM parts per million fast
//   --stale       every EVERY-th op reports the GPU times of the op SHIFT away (-1: an earlier
//                 work's timestamps, as shifted ring counters give; +2: a later work's)
//   --partial     every EVERY-th op announces one channel more than report; the channels that do
//                 report ran 4 ms late (the earliest one is the one missing)
//   --p2p-per-step  Send/Recv pairs per step in the step's kernel (an MoE all-to-all)
// What real NCCL does that a friendlier model would miss (issue 27):
//   --group       N collectives per step in one ncclGroupStart/End: one plan, one kernel, one
//                 Group event that is every op's parent (profiler.cc ncclProfilerStartGroupEvent /
//                 StartTaskEvents, v2.30.7 432-544); the ops split the plan's channels
//                 (enqueue.cc scheduleCollTasksToPlan, channelId is a running cursor) and each
//                 channel's batch stamps all its works with one start and one stop
//                 (device/common.h profiler(), v2.30.7 318-337): their GPU times overlap.
//                 Alternately ReduceScatter and AllGather, as FSDP and ZeRO coalesce them.
//   --bcast       every EVERY-th step a group of Broadcasts from ROOTS roots. With the v6 table
//                 (NCCL 2.29+) a Broadcast gets no Coll event, only its CollApi one
//                 (enqueue.cc collTaskAppend, v2.30.7 2703-2723). One root: rewritten into an
//                 ordinary task without profiler flag (ncclPrepareTasks 367-389) whose work
//                 counter stays in step (proxy.cc 761), seqNumber still counted (profiler.cc
//                 503-515). Two or more: one AllGatherV batch on CHANNELS channels (default all;
//                 small broadcasts use fewer) whose proxy op has no profiler part
//                 (scheduler/allgatherv_sched.cc 196-198): the kernel's per-channel work counter
//                 runs ROOTS works ahead of the host's (NVIDIA/nccl#2368), and from then on the
//                 proxy hands each op of those channels the timestamps of the work ROOTS before
//                 (transport/profiler.cc profilerProxyProgress: slot base % 64 once its counter
//                 reached base). With v4/v5 (NCCL <= 2.28) a Broadcast is an ordinary collective.
//   --gpu-lag     every rank's CPU enqueues MS ahead of its GPU (deep launch queues, CUDA graphs);
//                 20 ms by default, as an asynchronous training loop runs ahead (and so that a host
//                 hiccup shorter than that does not make this fake launch work after its GPU ran it)
//   --late-end    that rank's kernels end US later than the others' (a slow GPU), and its proxy
//                 reports them then
//   --pipeline    pipeline parallelism instead of data parallelism: rank s is stage s; per
//                 microbatch (step) it receives from s-1, computes, sends to s+1, each a p2p op in
//                 its own plan with kernel-channel events (enqueue.cc addP2pToPlan: one work per
//                 pair, v2.30.7 1059-1110). The late rank computes MS longer.
//   --comm-restarts  the communicator is destroyed and re-created N times (elastic restarts)
//   --gpus-per-process  one process drives G GPUs (G communicators of world x G ranks), each on
//                 its own device (through a fake libcuda's cuCtxGetDevice, which must be loaded:
//                 LD_LIBRARY_PATH) and with its own clock; --late-rank and --gpu-skew name GPU ranks
// NCCL_CONF_FILE (or ~/.nccl.conf, /etc/nccl.conf) is read for NCCL_PROFILER_PLUGIN as NCCL
// does (src/misc/param.cc): the environment wins, then the first definition. With the variable
// unset, libnccl-profiler.so is opened (plugin_open.cc openPluginLib's default name).
//
// GPU timestamps are synthetic: step i of every rank happens at base + i * step-ms on one
// shared timeline (CLOCK_REALTIME), so ranks (separate processes started by `laggard run
// --nproc`) agree on who arrived when without talking to each other; each process sleeps until
// its host calls and its proxy's callbacks are due. The communicator is never destroyed unless
// --finalize or --comm-restarts: most real jobs never call ncclCommDestroy.
// When the OS woke a rank more than 1 ms after a data-parallel step's host calls were due, it says
// so before it ends: "rank R: host late at STEP:MS ...". Host-timed arrivals really carry that.
#include <dlfcn.h>
#include <strings.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <queue>
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
  int group = 1;
  int bcast_every = 0, bcast_roots = 0, bcast_channels = 0;
  double gpu_lag_ms = 20;
  int late_end_rank = -1;
  double late_end_us = 0;
  bool pipeline = false;
  int comm_restarts = 0;
  int gpus_per_process = 1;
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
    else if (a == "--channels") o.channels = std::clamp(std::atoi(next()), 1, 64);
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
    else if (a == "--group") o.group = std::clamp(std::atoi(next()), 1, 64);
    else if (a == "--bcast") std::sscanf(next(), "%d:%d:%d", &o.bcast_every, &o.bcast_roots, &o.bcast_channels);
    else if (a == "--gpu-lag") o.gpu_lag_ms = std::atof(next());
    else if (a == "--late-end") std::sscanf(next(), "%d:%lf", &o.late_end_rank, &o.late_end_us);
    else if (a == "--pipeline") o.pipeline = true;
    else if (a == "--comm-restarts") o.comm_restarts = std::max(0, std::atoi(next()));
    else if (a == "--gpus-per-process") o.gpus_per_process = std::clamp(std::atoi(next()), 1, 8);
    else usage(("unknown option " + a).c_str());
  }
  if (!o.base_ns) usage("--base-ns is required (the shared timeline's start, epoch ns)");
  if (o.bcast_channels <= 0 || o.bcast_channels > o.channels) o.bcast_channels = o.channels;
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

int64_t epoch_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until_epoch(int64_t t) {
  for (int64_t now = epoch_now(); now < t; now = epoch_now())
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(t - now, 50'000'000)));
}

// One op's work on the GPU, on the shared timeline (real ns) and as its GPU's clock reads it.
struct GpuWork {
  int64_t start_real = 0, end_real = 0;
  uint64_t start_gpu = 0, end_gpu = 0;
};

// NCCL's per-channel profiler counters. The kernel numbers every work it runs on a channel and
// stamps the timed ones into ring slot number % 64 (device/common.h profiler()); the host numbers
// the works it expects stamps for (proxy.cc incWorkCounter); the proxy reports, for the op the
// host numbered b, ring slot b once that slot's counter reached b (transport/profiler.cc).
class Channel {
 public:
  // A work the kernel runs and the host counts alike; returns the work whose stamps the proxy
  // reports for it: its own unless the counters were shifted, an earlier one's if they were, -1
  // when its slot holds an unstamped work (the Broadcast's): then the slot is written 64 works
  // later, which this model leaves out (the op stays without that channel).
  long timed(const GpuWork& w) {
    device_.push_back({true, w});
    const long b = static_cast<long>(++host_);
    return device_[b - 1].timed ? b : -1;
  }
  // A work without profiler flag that the host still counts (proxy.cc 761).
  void untimed_counted() {
    device_.push_back({false, {}});
    ++host_;
  }
  // A work the host does not count (the AllGatherV Broadcast batch, NVIDIA/nccl#2368).
  void untimed_uncounted() { device_.push_back({false, {}}); }
  const GpuWork& work(long number) const { return device_[number - 1].w; }

 private:
  struct Work {
    bool timed;
    GpuWork w;
  };
  uint64_t host_ = 0;
  std::vector<Work> device_;
};

// The proxy thread: calls back with each channel's start and stop when they are due.
template <class Table, class Descr>
class Proxy {
 public:
  Proxy(Table* t) : table_(t), thread_([this] { run_thread(); }) {}
  ~Proxy() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void channel(void* ctx, void* op, int channel, const GpuWork& w, int64_t not_before) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t id = channels_.size();
    channels_.push_back({ctx, op, channel, nullptr});
    // The proxy sees a stamp a little after the GPU wrote it, never before the op was posted.
    heap_.push({std::max(not_before, w.start_real + 15'000), id, true, w.start_gpu});
    heap_.push({std::max(not_before, w.end_real + 15'000), id, false, w.end_gpu});
    cv_.notify_one();
  }

 private:
  struct Due {
    int64_t at;
    size_t id;
    bool start;
    uint64_t stamp;
    bool operator>(const Due& o) const { return at != o.at ? at > o.at : id != o.id ? id > o.id : start < o.start; }
  };
  struct Ch {
    void* ctx;
    void* op;
    int channel;
    void* handle;
  };

  void run_thread() {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // this thread's sleeps end on time (default slack: 50 us)
    run();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return done_ || !heap_.empty(); });
      if (heap_.empty()) return;
      // Due later (also while finishing: never before the GPU wrote it). NCCL's proxy thread
      // polls the stamps without sleeping while it has work, on a core of its own, so it reads a
      // stamp within microseconds (NCCL v2.28.9-1 src/proxy.cc: ncclProxyProgress, lines
      // 960-990, calls progressOps in a loop and only sched_yield()s when nothing progressed;
      // it blocks on pool->cond, line 797, only with no active op). Four ranks' proxies spinning on this 2-core test machine would
      // starve each other by a millisecond and more (most callbacks 750 us late, seen here), which
      // the report's callback checks rightly distrust: sleep until the stamp is due instead, on an
      // absolute deadline with a 1 ns timer slack (set in run_thread), which is as prompt as NCCL's.
      const int64_t at = heap_.top().at, now = epoch_now();
      if (at > now + 300'000) {
        cv_.wait_for(lock, std::chrono::nanoseconds(std::min<int64_t>(at - now - 200'000, 20'000'000)));
        continue;
      }
      if (at > now) {
        lock.unlock();
        const timespec due{static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)};
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &due, nullptr) == EINTR) {
        }
        lock.lock();
        continue;
      }
      Due d = heap_.top();
      heap_.pop();
      Ch& ch = channels_[d.id];
      lock.unlock();
      if (d.start) {
        Descr k{};
        k.type = nabi::kKernelCh;
        k.parentObj = ch.op;
        k.kernelCh.channelId = static_cast<uint8_t>(ch.channel);
        k.kernelCh.pTimer = d.stamp;
        table_->startEvent(ch.ctx, &ch.handle, &k);
      } else if (ch.handle) {
        nabi::StateArgs a{};
        a.kernelCh.pTimer = d.stamp;
        table_->recordEventState(ch.handle, nabi::kStateKernelChStop, &a);
        table_->stopEvent(ch.handle);
      }
      lock.lock();
    }
  }

  Table* table_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::deque<Ch> channels_;  // a deque: the proxy writes a handle into one while the driver adds more
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> heap_;
  std::thread thread_;
};

template <class Table, class Descr>
class Driver {
 public:
  Driver(Table* t, const Options& o, int rank, int world, int table_version)
      : table_(t), o_(o), process_rank_(rank), world_(world), table_version_(table_version), proxy_(t) {}

  int run() {
    const int G = o_.gpus_per_process;
    using SetDevice = void (*)(int);
    auto set_device = G > 1 ? reinterpret_cast<SetDevice>(dlsym(RTLD_DEFAULT, "laggard_fake_cuda_set_device")) : nullptr;
    if (G > 1 && !set_device) {
      void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
      set_device = cuda ? reinterpret_cast<SetDevice>(dlsym(cuda, "laggard_fake_cuda_set_device")) : nullptr;
      if (!set_device) usage("--gpus-per-process needs the fake libcuda.so.1 on LD_LIBRARY_PATH");
    }
    gpus_.resize(G);
    for (int g = 0; g < G; ++g) {
      if (set_device) set_device(g);  // cudaSetDevice before ncclCommInitRank
      gpus_[g].rank = process_rank_ * G + g;
      gpus_[g].channels.resize(o_.channels);
      if (!init(gpus_[g], 0)) return 0;
    }
    const int restarts_every = o_.comm_restarts ? std::max(1, o_.steps / (o_.comm_restarts + 1)) : 0;
    for (int i = 0; i < o_.steps; ++i) {
      if (restarts_every && i && i % restarts_every == 0 && i / restarts_every <= o_.comm_restarts)
        for (Gpu& gpu : gpus_) {  // ncclCommDestroy, then a new ncclCommInitRank (new unique id)
          table_->finalize(gpu.ctx);
          gpu.channels.assign(o_.channels, Channel());
          gpu.seq.clear();
          if (!init(gpu, i / restarts_every)) return 0;
        }
      if (o_.pipeline) pipeline_step(i);
      else for (Gpu& gpu : gpus_) data_parallel_step(gpu, i);
    }
    if (o_.finalize)
      for (Gpu& gpu : gpus_) table_->finalize(gpu.ctx);
    for (const Gpu& gpu : gpus_) print_host_late(gpu);
    std::printf("rank %d: %d steps done\n", process_rank_, o_.steps);
    return 0;
  }

 private:
  struct Gpu {
    int rank = 0;  // in the communicator
    void* ctx = nullptr;
    bool kernel_events = false;
    std::vector<Channel> channels;
    std::map<std::string, uint64_t> seq;  // NCCL's per-function seqNumber
    // (step, ms) where this rank's host enqueued more than kHostLateNs after its plan said: the OS
    // woke it late. Host-timed arrivals (NVIDIA/nccl#2368) then truly make it late; tests read
    // these from the "host late" line rather than guess how loaded the machine was.
    std::vector<std::pair<int, double>> host_late;
  };
  static constexpr int64_t kHostLateNs = 1'000'000;  // the report's floor for host-timed arrivals
  struct Op {  // one collective or p2p op of a plan, before it is posted
    const char* func;
    int root_or_peer = -1;
    bool p2p = false;
    uint64_t count = 1 << 20;
    const char* datatype = "ncclFloat32";
    GpuWork work;
    std::vector<int> channels;
    bool partial = false;
    void* handle = nullptr;
  };

  int world_gpus() const { return world_ * o_.gpus_per_process; }

  bool init(Gpu& gpu, int generation) {
    int mask = 0;
    const uint64_t hash = 0x5eedc0ffee000000ull | uint64_t(world_gpus()) | uint64_t(generation) << 16;
    int rc;
    if constexpr (std::is_same_v<Table, nabi::ProfilerV4>)
      rc = table_->init(&gpu.ctx, &mask, "world", hash, world_, world_gpus(), gpu.rank, nullptr);
    else
      rc = table_->init(&gpu.ctx, hash, &mask, "world", world_, world_gpus(), gpu.rank, nullptr);
    std::printf("rank %d: plugin '%s' init rc=%d mask=0x%x context=%s\n", gpu.rank, table_->name, rc, mask,
                gpu.ctx ? "set" : "null");
    gpu.kernel_events = mask & nabi::kKernelCh;
    return mask != 0;
  }

  // This GPU's clock: skewed and drifting against the shared timeline.
  uint64_t gpu_clock(const Gpu& gpu, int64_t t) const {
    double v = double(t);
    for (const auto& [r, us] : o_.skews)
      if (r == gpu.rank) v += us * 1000;
    if (gpu.rank == o_.drift_rank) v += double(t - o_.base_ns) * o_.drift_ppm * 1e-6;
    return static_cast<uint64_t>(v);
  }
  bool late(const Gpu& gpu) const { return o_.late_rank >= 0 && gpu.rank == o_.late_rank; }
  GpuWork work(const Gpu& gpu, int64_t start, int64_t end) const {
    if (gpu.rank == o_.late_end_rank) end += static_cast<int64_t>(o_.late_end_us * 1000);
    return {start, end, gpu_clock(gpu, start), gpu_clock(gpu, end)};
  }

  // The shared timeline of data-parallel step i on a GPU: arrival and end. The CPUs follow it
  // from base on; the GPUs gpu-lag later.
  int64_t gpu_base() const { return o_.base_ns + lag_ns(); }
  int64_t arrive_at(const Gpu& gpu, int i) const {
    return gpu_base() + int64_t(i) * step_ns() + jitter(gpu.rank, i) + (late(gpu) ? late_ns() : 0);
  }
  int64_t end_at(const Gpu& gpu, int i) const {
    const bool anyone_late = o_.late_rank >= 0 && o_.late_rank < world_gpus();
    return gpu_base() + int64_t(i) * step_ns() + (anyone_late ? late_ns() : 0) + 5000 + 300'000 +
           jitter(gpu.rank + 100, i) / 10;
  }
  int64_t step_ns() const { return static_cast<int64_t>(o_.step_ms * 1e6); }
  int64_t late_ns() const { return static_cast<int64_t>(o_.late_ms * 1e6); }
  int64_t lag_ns() const { return static_cast<int64_t>(o_.gpu_lag_ms * 1e6); }

  void data_parallel_step(Gpu& gpu, int i) {
    const bool bcast = o_.bcast_every > 0 && i % o_.bcast_every == o_.bcast_every - 1;
    // The CPU reaches the step just before its GPU does (or gpu-lag earlier).
    sleep_until_epoch(arrive_at(gpu, i) - lag_ns() - 30'000);
    std::vector<Op> ops;
    for (int k = 0; k < o_.group; ++k) {
      Op op;
      op.func = o_.group == 1 ? "AllReduce" : k % 2 ? "AllGather" : "ReduceScatter";
      if (k % 2 && o_.group > 1) op.datatype = "ncclInt8";  // AllGather counts bytes (enqueue.cc)
      int times_of = i;  // whose GPU times this op reports (--stale)
      if (gpu.rank == o_.stale_rank && o_.stale_every > 0 && i % o_.stale_every == o_.stale_every - 1 &&
          i + o_.stale_shift >= 0 && i + o_.stale_shift < o_.steps)
        times_of = i + o_.stale_shift;
      // One kernel: every op of the group starts when it does and ends with it (a few ns apart
      // per channel).
      op.work = work(gpu, arrive_at(gpu, times_of) + k * 200, end_at(gpu, times_of) - k * 200);
      // The group splits the plan's channels; a lone op takes them all.
      const int per = std::max(1, o_.channels / o_.group);
      for (int c = (k * per) % o_.channels, n = 0; n < per; ++n) op.channels.push_back((c + n) % o_.channels);
      op.partial = gpu.rank == o_.partial_rank && o_.partial_every > 0 && i % o_.partial_every == o_.partial_every - 1;
      ops.push_back(op);
    }
    post_plan(gpu, ops, /*send_every_10=*/i % 10 == 0, i);
    // Read after the host's events, so it bounds how late the plugin saw them.
    const int64_t late_ns = epoch_now() - (arrive_at(gpu, i) - lag_ns() - 30'000);
    if (late_ns > kHostLateNs) gpu.host_late.emplace_back(i, double(late_ns) / 1e6);
    if (bcast) broadcast_group(gpu, i);
  }

  // "rank R: host late at STEP:MS ..." (data-parallel steps only), when it ever was.
  static void print_host_late(const Gpu& gpu) {
    if (gpu.host_late.empty()) return;
    std::string line = "rank " + std::to_string(gpu.rank) + ": host late at";
    char item[48];
    for (const auto& [step, ms] : gpu.host_late) {
      std::snprintf(item, sizeof item, " %d:%.3f", step, ms);
      line += item;
    }
    std::printf("%s\n", line.c_str());
  }

  // A Broadcast group after step i (see --bcast).
  void broadcast_group(Gpu& gpu, int i) {
    void* api = group_api(gpu);
    const bool v6 = table_version_ >= 6;
    for (int root = 0; root < o_.bcast_roots; ++root) {
      if constexpr (!std::is_same_v<Descr, nabi::DescrV4>) {
        Descr d{};
        d.type = nabi::kCollApi;
        d.parentObj = api;
        d.collApi.func = "Broadcast";
        d.collApi.count = 4096;
        d.collApi.datatype = "ncclFloat32";
        d.collApi.root = root;
        void* h = nullptr;
        table_->startEvent(gpu.ctx, &h, &d);
        if (h) table_->stopEvent(h);
      }
    }
    if (api) table_->stopEvent(api);
    if (!v6) {  // NCCL <= 2.28: ordinary collectives, after everything else of the step
      std::vector<Op> ops;
      for (int root = 0; root < o_.bcast_roots; ++root) {
        Op op;
        op.func = "Broadcast";
        op.root_or_peer = root;
        op.datatype = "ncclInt8";
        op.count = 16384;
        op.work = work(gpu, end_at(gpu, i) + 10'000, end_at(gpu, i) + 60'000);
        for (int c = 0; c < o_.channels; ++c) op.channels.push_back(c);
        ops.push_back(op);
      }
      post_plan(gpu, ops, false, i);
      return;
    }
    if (o_.bcast_roots == 1) {  // rewritten: no events, seq counted, counters in step
      ++gpu.seq["Broadcast"];
      for (int c = 0; c < o_.bcast_channels; ++c) gpu.channels[c].untimed_counted();
    } else {  // the AllGatherV batch: one work per root on each of its channels, not counted by the host
      for (int c = 0; c < o_.bcast_channels; ++c)
        for (int root = 0; root < o_.bcast_roots; ++root) gpu.channels[c].untimed_uncounted();
    }
  }

  void* group_api(const Gpu& gpu) {
    void* api = nullptr;
    if constexpr (!std::is_same_v<Descr, nabi::DescrV4>) {
      Descr g{};
      g.type = nabi::kGroupApi;
      table_->startEvent(gpu.ctx, &api, &g);
      table_->recordEventState(api, 23, nullptr);
      table_->recordEventState(api, 24, nullptr);
    }
    return api;
  }

  // One plan: API events, the Group event, every op's start and stop (the host's upload), then
  // the proxy's channel events when the GPU gets there.
  void post_plan(Gpu& gpu, std::vector<Op>& ops, bool extra_send, int i) {
    void* api = group_api(gpu);
    if constexpr (!std::is_same_v<Descr, nabi::DescrV4>) {
      for (Op& op : ops) {
        Descr d{};
        d.type = op.p2p ? nabi::kP2pApi : nabi::kCollApi;
        d.parentObj = api;
        if (!op.p2p) {
          d.collApi.func = op.func;
          d.collApi.root = op.root_or_peer;
          d.collApi.count = op.count;
          d.collApi.datatype = op.datatype;
        }
        void* h = nullptr;
        table_->startEvent(gpu.ctx, &h, &d);
        if (h) table_->stopEvent(h);
      }
    }
    Descr group{};
    group.type = nabi::kGroup;
    void* group_handle = nullptr;
    table_->startEvent(gpu.ctx, &group_handle, &group);
    for (Op& op : ops) {
      Descr d{};
      d.rank = gpu.rank;
      if (op.p2p) {
        d.type = nabi::kP2p;
        d.p2p.func = op.func;
        d.p2p.datatype = op.datatype;
        d.p2p.count = op.count;
        d.p2p.peer = op.root_or_peer;
        d.p2p.nChannels = static_cast<uint8_t>(op.channels.size());
        if constexpr (std::is_same_v<Descr, nabi::DescrV4>) d.parentObj = group_handle;
        else d.p2p.parentGroup = group_handle;
      } else {
        d.type = nabi::kColl;
        d.coll.seqNumber = gpu.seq[op.func]++;
        d.coll.func = op.func;
        d.coll.count = op.count;
        d.coll.root = op.root_or_peer < 0 ? 0 : op.root_or_peer;
        d.coll.datatype = op.datatype;
        d.coll.nChannels = static_cast<uint8_t>(op.channels.size());  // partial ops: one of them never reports
        d.coll.nWarps = 16;
        d.coll.algo = "RING";
        d.coll.proto = "SIMPLE";
        if constexpr (std::is_same_v<Descr, nabi::DescrV4>) d.parentObj = group_handle;
        else d.coll.parentGroup = group_handle;
      }
      // NCCL 2.27 (v4) starts collectives only under a non-null group handle.
      if (table_version_ >= 5 || group_handle) table_->startEvent(gpu.ctx, &op.handle, &d);
    }
    void* send = extra_send ? lone_send(gpu, group_handle) : nullptr;
    std::vector<void*> flood = all_to_all(gpu, group_handle);
    for (Op& op : ops)
      if (op.handle) table_->stopEvent(op.handle);
    if (send) table_->stopEvent(send);
    for (void* h : flood) table_->stopEvent(h);
    if (group_handle) table_->stopEvent(group_handle);
    if (api) table_->stopEvent(api);
    if (!gpu.kernel_events) return;
    const int64_t posted = epoch_now();
    for (Op& op : ops) post_channels(gpu, op, posted);
    if (send) {
      GpuWork w = work(gpu, arrive_at(gpu, i), arrive_at(gpu, i) + 20'000);
      proxy_.channel(gpu.ctx, send, 0, w, posted);
    }
    // The all-to-all runs in the same kernel: its channels carry the kernel's stamps (an untimed
    // op's handle starts no channel event in laggard).
    for (void* h : flood) proxy_.channel(gpu.ctx, h, 0, ops.front().work, posted);
  }

  void post_channels(Gpu& gpu, Op& op, int64_t posted) {
    if (!op.handle) return;
    const size_t reporting = op.partial ? op.channels.size() - 1 : op.channels.size();
    for (size_t n = 0; n < op.channels.size(); ++n) {
      const int c = op.channels[n];
      GpuWork w = op.work;
      const int64_t spread = int64_t(c) * 40;
      w.start_real += spread, w.start_gpu += spread, w.end_real -= spread, w.end_gpu -= spread;
      if (op.partial) w.start_real += 4'000'000, w.start_gpu += 4'000'000, w.end_real += 4'000'000, w.end_gpu += 4'000'000;
      const long stamped = gpu.channels[c].timed(w);
      if (n + reporting < op.channels.size()) continue;  // --partial: the earliest channel never reports
      if (stamped < 0) continue;  // its slot is written 64 works later, if ever: the op stays partial
      proxy_.channel(gpu.ctx, op.handle, c, gpu.channels[c].work(stamped), posted);
    }
  }

  void* lone_send(Gpu& gpu, void* group_handle) {  // a pipeline-style send to the next rank now and then
    Descr p{};
    p.type = nabi::kP2p;
    p.rank = gpu.rank;
    p.p2p.func = "Send";
    p.p2p.datatype = "ncclFloat32";
    p.p2p.count = 4096;
    p.p2p.peer = (gpu.rank + 1) % world_gpus();
    p.p2p.nChannels = 1;
    if constexpr (std::is_same_v<Descr, nabi::DescrV4>) p.parentObj = group_handle;
    else p.p2p.parentGroup = group_handle;
    void* h = nullptr;
    table_->startEvent(gpu.ctx, &h, &p);
    return h;
  }

  std::vector<void*> all_to_all(Gpu& gpu, void* group_handle) {  // a send and a receive per peer
    std::vector<void*> flood;
    for (int k = 0; k < o_.p2p_per_step; ++k)
      for (const char* func : {"Send", "Recv"}) {
        Descr p{};
        p.type = nabi::kP2p;
        p.rank = gpu.rank;
        p.p2p.func = func;
        p.p2p.datatype = "ncclBfloat16";
        p.p2p.count = 1024;
        p.p2p.peer = k % world_gpus();
        p.p2p.nChannels = 1;
        if constexpr (std::is_same_v<Descr, nabi::DescrV4>) p.parentObj = group_handle;
        else p.p2p.parentGroup = group_handle;
        void* h = nullptr;
        table_->startEvent(gpu.ctx, &h, &p);
        if (h) flood.push_back(h);
      }
    return flood;
  }

  // Pipeline parallelism (--pipeline): every process computes the same schedule of every stage,
  // then plays its own stage's receives and sends. A transfer starts when both sides are there.
  struct Transfer {
    int64_t send_arrive = 0, recv_arrive = 0, end = 0;
  };
  void pipeline_step(int m) {
    if (schedule_.empty()) schedule_pipeline();
    Gpu& gpu = gpus_.front();
    const int s = gpu.rank, S = world_gpus();
    auto p2p = [&](const char* func, int peer, int64_t arrive, int64_t end) {
      sleep_until_epoch(arrive - lag_ns() - 30'000);
      Op op;
      op.p2p = true;
      op.func = func;
      op.root_or_peer = peer;
      op.count = 1 << 18;
      op.datatype = "ncclBfloat16";
      op.work = work(gpu, arrive, end);
      op.channels = {0};
      std::vector<Op> ops{op};
      post_plan(gpu, ops, false, m);
    };
    if (s > 0) {
      const Transfer& t = schedule_[m][s - 1];
      p2p("Recv", s - 1, t.recv_arrive, t.end);
    }
    if (s < S - 1) {
      const Transfer& t = schedule_[m][s];
      p2p("Send", s + 1, t.send_arrive, t.end);
    }
  }
  void schedule_pipeline() {
    const int S = world_gpus();
    const int64_t xfer = 200'000;
    std::vector<int64_t> free_at(S, gpu_base());  // when each stage's GPU can take its next op
    schedule_.assign(o_.steps, std::vector<Transfer>(std::max(1, S - 1)));
    for (int m = 0; m < o_.steps; ++m) {
      int64_t ready = free_at[0];  // stage 0 has its input at once
      for (int s = 0; s < S; ++s) {
        const int64_t compute = step_ns() + jitter(s, m) + (s == o_.late_rank ? late_ns() : 0);
        const int64_t done = ready + compute;  // ready: its receive ended (or stage 0 free)
        if (s == S - 1) {
          free_at[s] = done;
          break;
        }
        Transfer& t = schedule_[m][s];
        t.send_arrive = done;
        t.recv_arrive = free_at[s + 1];
        t.end = std::max(t.send_arrive, t.recv_arrive) + xfer;
        free_at[s] = t.end;
        ready = t.end;
      }
    }
  }

  Table* table_;
  const Options& o_;
  const int process_rank_, world_, table_version_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<Transfer>> schedule_;  // [microbatch][stage s]: s -> s+1
  Proxy<Table, Descr> proxy_;
};

template <class Table, class Descr>
int drive(Table* table, const Options& o, int rank, int world, int table_version) {
  Driver<Table, Descr> driver(table, o, rank, world, table_version);
  return driver.run();
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
  if (v6) return drive<nabi::ProfilerV6, nabi::DescrV6>(static_cast<nabi::ProfilerV6*>(v6), o, rank, world, 6);
  if (v5) return drive<nabi::ProfilerV5, nabi::DescrV5>(static_cast<nabi::ProfilerV5*>(v5), o, rank, world, 5);
  if (v4) return drive<nabi::ProfilerV4, nabi::DescrV4>(static_cast<nabi::ProfilerV4*>(v4), o, rank, world, 4);
  std::printf("rank %d: plugin has no ncclProfiler_v4/v5/v6 table\n", rank);
  return 0;
}
