// A fake NCCL driver: loads liblaggard.so the way NCCL does (dlopen of NCCL_PROFILER_PLUGIN's
// value, dlsym of the versioned table), then calls init/startEvent/recordEventState/stopEvent/
// finalize with v4, v5 and v6 descriptors, from several threads and with the inputs real NCCL
// versions are known to produce (null handles, stale handles, stops without starts, garbage in
// the handle slot), and reads the written files back with the report reader.
// Its own executable: loading the library sets environment variables and starts threads.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <vector>
#include <thread>
#include <time.h>

#include "abi_v4.h"
#include "abi_v6.h"
#include "reader.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
namespace nabi = laggard::nccl::abi;
using laggard::report::Collective;
using laggard::report::RunModel;

namespace nccl_plugin_driver_test {

constexpr int kExpectedMask = nabi::kColl | nabi::kP2p | nabi::kKernelCh;

int64_t epoch_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class NcclDriver : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = laggard::testing::per_process_out_dir(LAGGARD_TEST_OUT);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LAGGARD_OUT", out_.c_str(), 1);
    setenv("LAGGARD_RUN_ID", "unit", 1);
    setenv("LAGGARD_FLUSH_S", "0.1", 1);
    unsetenv("NCCL_PROFILER_PLUGIN");
    unsetenv("LAGGARD_NCCL");
    // Whichever table a test calls first (each test may run alone): kernel events on.
    setenv("LAGGARD_NCCL_KERNEL_EVENTS", "1", 1);
    setenv("NCCL_CONF_FILE", "/nonexistent/nccl.conf", 1);
    // The plugin captures only where laggard was preloaded (a child that inherits only
    // NCCL_PROFILER_PLUGIN must not); the loader itself ignores a change of LD_PRELOAD now.
    setenv("LD_PRELOAD", LAGGARD_LIBRARY, 1);
    handle_ = dlopen(LAGGARD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    // NCCL 2.27.5+: dlopen(NCCL_PROFILER_PLUGIN) as given, then the newest table first.
    const char* plugin = getenv("NCCL_PROFILER_PLUGIN");
    ASSERT_NE(plugin, nullptr);
    nccl_lib_ = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nccl_lib_, nullptr) << dlerror();
    v4_ = static_cast<nabi::ProfilerV4*>(dlsym(nccl_lib_, "ncclProfiler_v4"));
    v5_ = static_cast<nabi::ProfilerV5*>(dlsym(nccl_lib_, "ncclProfiler_v5"));
    v6_ = static_cast<nabi::ProfilerV6*>(dlsym(nccl_lib_, "ncclProfiler_v6"));
    ASSERT_TRUE(v4_ && v5_ && v6_);
  }

  // All collectives of one communicator (by id) once `ready` holds for them.
  static std::vector<Collective> wait_for(const std::string& comm_id,
                                          const std::function<bool(const std::vector<Collective>&)>& ready,
                                          RunModel* model_out = nullptr, double timeout_s = 10) {
    std::vector<Collective> found;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      try {
        RunModel m = laggard::report::read_run((out_ / "unit").string());
        found.clear();
        for (const auto& w : m.ranks.at(0).windows)
          for (const auto& c : w.collectives)
            if (m.strings.at(c.comm) == comm_id) found.push_back(c);
        if (ready(found)) {
          if (model_out) *model_out = std::move(m);
          return found;
        }
      } catch (...) {
      }
    }
    ADD_FAILURE() << "timed out waiting for communicator " << comm_id << " (have " << found.size() << " ops)";
    return found;
  }
  static RunModel model() { return laggard::report::read_run((out_ / "unit").string()); }

  static uint64_t window_drops(const RunModel& m, const std::string& key) {
    uint64_t n = 0;
    for (const auto& w : m.ranks.at(0).windows)
      if (auto it = w.dropped.find(key); it != w.dropped.end()) n += it->second;
    return n;
  }

  template <class D>
  static D coll_descr(uint64_t seq, uint8_t channels, void* parent = nullptr) {
    D d{};
    d.type = nabi::kColl;
    d.parentObj = parent;
    d.rank = 1;
    d.coll.seqNumber = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.root = -1;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = channels;
    d.coll.nWarps = 16;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    return d;
  }

  template <class D>
  static D kernel_descr(void* parent, uint8_t channel, uint64_t start) {
    D d{};
    d.type = nabi::kKernelCh;
    d.parentObj = parent;
    d.kernelCh.channelId = channel;
    d.kernelCh.pTimer = start;
    return d;
  }

  // The proxy thread's part of one operation: per channel, start, KernelCh-stop state, stop.
  template <class T, class D>
  static void run_channels(T* table, void* ctx, void* op, int channels, uint64_t start, uint64_t stop) {
    for (int c = 0; c < channels; ++c) {
      D k = kernel_descr<D>(op, static_cast<uint8_t>(c), start + c * 100);
      void* h = reinterpret_cast<void*>(0x5eed);  // NCCL does not clear the slot it passes
      ASSERT_EQ(table->startEvent(ctx, &h, &k), 0);
      ASSERT_NE(h, nullptr);
      nabi::StateArgs a{};
      a.kernelCh.pTimer = stop - c * 100;
      ASSERT_EQ(table->recordEventState(h, nabi::kStateKernelChStop, &a), 0);
      ASSERT_EQ(table->stopEvent(h), 0);
    }
  }

  static inline fs::path out_;
  static inline void* handle_ = nullptr;
  static inline void* nccl_lib_ = nullptr;
  static inline nabi::ProfilerV4* v4_ = nullptr;
  static inline nabi::ProfilerV5* v5_ = nullptr;
  static inline nabi::ProfilerV6* v6_ = nullptr;
};

TEST_F(NcclDriver, ConstructorOffersTheLibraryAndNcclFindsIt) {
  EXPECT_STREQ(getenv("NCCL_PROFILER_PLUGIN"), "liblaggard.so");
  EXPECT_EQ(nccl_lib_, handle_);  // the soname resolves to the library already loaded
  EXPECT_STREQ(v5_->name, "laggard");
  EXPECT_STREQ(v4_->name, "laggard");
  EXPECT_STREQ(v6_->name, "laggard");
  // STATIC_PLUGIN (dlopen(NULL)) finds the tables only when the library is global, i.e. preloaded;
  // here it was loaded RTLD_LOCAL, so that path is covered by the integration tests.
}

TEST_F(NcclDriver, V5CollectivesGetHostAndGpuTimes) {
  void* ctx = reinterpret_cast<void*>(0x1);
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabc5, &mask, "world", 2, 2, 1, nullptr), 0);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(mask, kExpectedMask);

  std::map<uint64_t, uint64_t> gpu_start_of;  // by seq
  for (uint64_t seq = 0; seq < 20; ++seq) {
    // API-level events arrive as parents; laggard answers a GroupApi with a handle without state
    // (it tells the Broadcasts of one group apart) and a CollApi with null.
    nabi::DescrV5 api{};
    api.type = nabi::kGroupApi;
    void* api_handle = reinterpret_cast<void*>(0xbad);
    ASSERT_EQ(v5_->startEvent(ctx, &api_handle, &api), 0);
    EXPECT_NE(api_handle, reinterpret_cast<void*>(0xbad));
    EXPECT_EQ(v5_->recordEventState(api_handle, 23, nullptr), 0);  // 2.28 passes null args here
    nabi::DescrV5 capi{};
    capi.type = nabi::kCollApi;
    capi.parentObj = api_handle;
    capi.collApi.func = "AllReduce";
    void* capi_handle = reinterpret_cast<void*>(0xbad);
    ASSERT_EQ(v5_->startEvent(ctx, &capi_handle, &capi), 0);
    EXPECT_EQ(capi_handle, nullptr);
    nabi::DescrV5 group{};
    group.type = nabi::kGroup;
    void* group_handle = nullptr;
    ASSERT_EQ(v5_->startEvent(ctx, &group_handle, &group), 0);
    ASSERT_NE(group_handle, nullptr);  // NCCL 2.27 starts collectives only under a group handle
    nabi::DescrV5 d = coll_descr<nabi::DescrV5>(seq, 2);
    d.coll.parentGroup = group_handle;
    void* op = nullptr;
    ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
    ASSERT_NE(op, nullptr);
    // Parents stop before their children start.
    ASSERT_EQ(v5_->stopEvent(op), 0);
    ASSERT_EQ(v5_->stopEvent(group_handle), 0);
    ASSERT_EQ(v5_->stopEvent(api_handle), 0);
    // GPU times as NCCL's proxy sees them: written before it calls back, one op after the other.
    // Taken on the proxy thread itself, so the proxy's lag (callback - GPU time) is the same for
    // every op, as the after_callback check expects: a thread start took up to ~1 ms under
    // ASan, and an op whose thread started 0.5 ms faster than its neighbours' was flagged.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::thread proxy([&] {
      uint64_t start = static_cast<uint64_t>(epoch_ns()) - 60'000;
      gpu_start_of[seq] = start;
      run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, op, 2, start, start + 50'000);
    });
    proxy.join();
  }
  auto ops = wait_for("000000000000abc5", [](auto& v) { return v.size() >= 20; });
  ASSERT_EQ(ops.size(), 20u);
  RunModel m = model();
  std::set<uint64_t> seqs;
  for (const Collective& c : ops) {
    seqs.insert(c.seq);
    EXPECT_EQ(m.strings.at(c.func), "AllReduce");
    EXPECT_EQ(m.strings.at(c.datatype), "ncclFloat32");
    EXPECT_EQ(m.strings.at(c.algo), "RING");
    EXPECT_EQ(m.strings.at(c.proto), "SIMPLE");
    EXPECT_EQ(m.strings.at(c.comm_name), "world");
    EXPECT_EQ(c.comm_nranks, 2);
    EXPECT_EQ(c.comm_rank, 1);
    EXPECT_EQ(c.comm_nnodes, 2);
    EXPECT_FALSE(c.p2p);
    EXPECT_EQ(c.count, 1024u);
    EXPECT_EQ(c.bytes, 4096u);
    EXPECT_EQ(c.nchannels, 2);
    EXPECT_GT(c.upload_start_ns, 0);
    EXPECT_GE(c.upload_end_ns, c.upload_start_ns);
    // The host times of the proxy's callbacks: after the upload, one start and one stop per op.
    EXPECT_GE(c.chan_host_start_ns, c.upload_start_ns);
    EXPECT_GE(c.chan_host_stop_ns, c.chan_host_start_ns);
    EXPECT_EQ(c.channels, 2);
    EXPECT_EQ(c.gpu_time_suspect, nullptr) << c.gpu_time_suspect << " seq " << c.seq;
    // Earliest channel start, latest channel stop.
    int64_t start = static_cast<int64_t>(gpu_start_of[c.seq]);
    EXPECT_EQ(c.gpu_start_ns, start);
    EXPECT_EQ(c.gpu_end_ns, start + 50'000);
  }
  EXPECT_EQ(seqs.size(), 20u);
  // What NCCL did: the table it called, and that kernel events were asked for.
  bool plugin_seen = false;
  for (const auto& w : m.ranks.at(0).windows)
    if (w.nccl_table) {
      plugin_seen = true;
      EXPECT_EQ(w.nccl_kernel_events, "on");
    }
  EXPECT_TRUE(plugin_seen);
  EXPECT_EQ(v5_->finalize(ctx), 0);
}

TEST_F(NcclDriver, V4CollectivesAndP2p) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v4_->init(&ctx, &mask, nullptr, 0xabc4, 1, 4, 3, nullptr), 0);  // commName may be null
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(mask, kExpectedMask);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());

  nabi::DescrV4 group{};
  group.type = nabi::kGroup;
  void* group_handle = nullptr;
  ASSERT_EQ(v4_->startEvent(ctx, &group_handle, &group), 0);
  nabi::DescrV4 d = coll_descr<nabi::DescrV4>(7, 1, group_handle);
  d.coll.func = "AllGather";
  d.coll.datatype = "ncclInt8";  // NCCL reports AllGather counts in bytes
  void* coll = nullptr;
  ASSERT_EQ(v4_->startEvent(ctx, &coll, &d), 0);
  nabi::DescrV4 p{};
  p.type = nabi::kP2p;
  p.parentObj = group_handle;
  p.rank = 3;
  p.p2p.func = "Send";
  p.p2p.datatype = "ncclBfloat16";
  p.p2p.count = 100;
  p.p2p.peer = 2;
  p.p2p.nChannels = 1;
  void* send = nullptr;
  ASSERT_EQ(v4_->startEvent(ctx, &send, &p), 0);
  ASSERT_NE(send, nullptr);
  v4_->stopEvent(coll);
  v4_->stopEvent(send);
  v4_->stopEvent(group_handle);
  run_channels<nabi::ProfilerV4, nabi::DescrV4>(v4_, ctx, coll, 1, t0, t0 + 9000);
  // A p2p op's channels (issue 27): timed like a collective's.
  run_channels<nabi::ProfilerV4, nabi::DescrV4>(v4_, ctx, send, 1, t0 + 100, t0 + 600);

  RunModel m;
  auto ops = wait_for("000000000000abc4", [](auto& v) { return v.size() >= 2; }, &m);
  ASSERT_EQ(ops.size(), 2u);
  const Collective& c = ops[0].p2p ? ops[1] : ops[0];
  EXPECT_EQ(c.comm_name, laggard::report::StringTable::kNone);
  EXPECT_EQ(c.comm_nranks, 4);
  EXPECT_EQ(c.comm_rank, 3);
  EXPECT_FALSE(c.p2p);
  EXPECT_EQ(m.strings.at(c.func), "AllGather");
  EXPECT_EQ(c.seq, 7u);
  EXPECT_EQ(c.bytes, 1024u);
  EXPECT_EQ(c.gpu_end_ns - c.gpu_start_ns, 9000);
  EXPECT_EQ(c.group, (ops[0].p2p ? ops[0] : ops[1]).group);  // one plan (v4: the group is the parent)
  EXPECT_NE(c.group, 0u);
  // The send: listed with its bytes, peer, index and GPU times.
  const Collective& s = ops[0].p2p ? ops[0] : ops[1];
  EXPECT_TRUE(s.p2p);
  EXPECT_EQ(m.strings.at(s.func), "Send");
  EXPECT_EQ(s.peer, 2);
  EXPECT_EQ(s.seq, 0u);
  EXPECT_EQ(s.bytes, 200u);
  EXPECT_EQ(s.gpu_end_ns - s.gpu_start_ns, 500);
}

// An all-to-all flood (MoE) does not take the collectives' slots (issue 11 item 2): 16 of its ops
// are timed (issue 27), the rest counted.
TEST_F(NcclDriver, P2pFloodLeavesTheCollectivePoolAlone) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabc9, &mask, "moe", 1, 8, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  // Far more sends and receives than the 8192 in-flight slots, none of them ever stopped.
  for (int i = 0; i < 20000; ++i) {
    nabi::DescrV5 p{};
    p.type = nabi::kP2p;
    p.p2p.func = i % 2 ? "Recv" : "Send";
    p.p2p.datatype = "ncclBfloat16";
    p.p2p.count = 8;
    p.p2p.peer = i % 8;
    p.p2p.nChannels = 1;
    void* h = nullptr;
    ASSERT_EQ(v5_->startEvent(ctx, &h, &p), 0);
    ASSERT_NE(h, nullptr);
  }
  nabi::DescrV5 d = coll_descr<nabi::DescrV5>(0, 1);
  void* op = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
  ASSERT_NE(op, nullptr);
  v5_->stopEvent(op);
  run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, op, 1, t0, t0 + 1000);
  RunModel m;
  auto ops = wait_for("000000000000abc9", [](auto& v) { return !v.empty(); }, &m);
  ASSERT_EQ(ops.size(), 1u);
  uint64_t sends = 0, recvs = 0, bytes = 0;
  for (const auto& w : m.ranks.at(0).windows)
    for (const auto& p : w.p2p)
      if (m.strings.at(p.comm) == "000000000000abc9") sends += p.sends, recvs += p.recvs, bytes += p.recv_bytes;
  EXPECT_EQ(sends + recvs, 20000u - 16);
  EXPECT_EQ(bytes, recvs * 16);
  EXPECT_GE(recvs, 10000u - 16);
  EXPECT_EQ(window_drops(m, "nccl_pool_full"), 0u);
}

TEST_F(NcclDriver, V6IgnoresCopyEngineEventsAndKeepsCollectives) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v6_->init(&ctx, 0xabc6, &mask, "tp", 1, 2, 1, nullptr), 0);
  EXPECT_EQ(mask & (nabi::kCeColl | nabi::kCeSync | nabi::kCeBatch), 0);
  nabi::DescrV6 ce{};
  ce.type = nabi::kCeColl;
  ce.ceColl.func = "AllGather";
  void* ce_handle = reinterpret_cast<void*>(0xbad);
  ASSERT_EQ(v6_->startEvent(ctx, &ce_handle, &ce), 0);
  EXPECT_EQ(ce_handle, nullptr);

  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  nabi::DescrV6 d = coll_descr<nabi::DescrV6>(3, 2);
  d.coll.func = "ReduceScatter";
  void* op = nullptr;
  ASSERT_EQ(v6_->startEvent(ctx, &op, &d), 0);
  v6_->stopEvent(op);
  run_channels<nabi::ProfilerV6, nabi::DescrV6>(v6_, ctx, op, 2, t0, t0 + 7000);
  auto ops = wait_for("000000000000abc6", [](auto& v) { return !v.empty(); });
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].seq, 3u);
  EXPECT_EQ(ops[0].gpu_end_ns - ops[0].gpu_start_ns, 7000);
}

TEST_F(NcclDriver, ToleratesNullsStaleHandlesAndEventsItNeverStarted) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabc7, &mask, "edge", 1, 2, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());

  // Nulls everywhere NCCL might pass them.
  nabi::DescrV5 d = coll_descr<nabi::DescrV5>(0, 1);
  EXPECT_EQ(v5_->startEvent(ctx, nullptr, &d), 0);
  void* h = reinterpret_cast<void*>(0xbad);
  EXPECT_EQ(v5_->startEvent(ctx, &h, nullptr), 0);
  EXPECT_EQ(h, nullptr);
  h = reinterpret_cast<void*>(0xbad);
  EXPECT_EQ(v5_->startEvent(nullptr, &h, &d), 0);  // a communicator laggard does not track
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(v5_->stopEvent(nullptr), 0);
  EXPECT_EQ(v5_->recordEventState(nullptr, nabi::kStateKernelChStop, nullptr), 0);
  EXPECT_EQ(v5_->finalize(nullptr), 0);
  // A context that is not one of ours (NCCL's PXN proxies can pass another process's).
  int not_a_context = 0;
  h = reinterpret_cast<void*>(0xbad);
  EXPECT_EQ(v5_->startEvent(&not_a_context, &h, &d), 0);
  EXPECT_EQ(h, nullptr);
  // A kernel channel whose parent was dropped.
  nabi::DescrV5 orphan = kernel_descr<nabi::DescrV5>(nullptr, 0, t0);
  h = reinterpret_cast<void*>(0xbad);
  EXPECT_EQ(v5_->startEvent(ctx, &h, &orphan), 0);
  EXPECT_EQ(h, nullptr);
  // Stops and states for handles laggard never issued (a stop seen before its start).
  nabi::StateArgs args{};
  args.kernelCh.pTimer = t0 + 1;
  for (void* junk : {reinterpret_cast<void*>(0xdeadbeef), reinterpret_cast<void*>(0x3),
                     reinterpret_cast<void*>(~uintptr_t{0})}) {
    EXPECT_EQ(v5_->recordEventState(junk, nabi::kStateKernelChStop, &args), 0);
    EXPECT_EQ(v5_->stopEvent(junk), 0);
  }

  // One real collective; afterwards its kernel handle is replayed the way NCCL replays a
  // pooled proxy slot it never cleared (#2221): the late stop must not change the record.
  void* op = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
  v5_->stopEvent(op);
  v5_->stopEvent(op);  // a second stop: ignored
  nabi::DescrV5 k = kernel_descr<nabi::DescrV5>(op, 0, t0);
  void* kh = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &kh, &k), 0);
  args.kernelCh.pTimer = t0 + 3000;
  v5_->recordEventState(kh, nabi::kStateKernelChStop, &args);
  v5_->recordEventState(kh, 8, nullptr);  // other states: args never read
  v5_->stopEvent(kh);
  args.kernelCh.pTimer = t0 + 999'999;
  v5_->recordEventState(kh, nabi::kStateKernelChStop, &args);  // stale: channel already stopped
  v5_->stopEvent(kh);

  RunModel m;
  auto ops = wait_for("000000000000abc7", [](auto& v) { return !v.empty(); }, &m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].gpu_end_ns - ops[0].gpu_start_ns, 3000);
  // Once written, the op's handles are dead: replaying them changes nothing and crashes nothing.
  v5_->recordEventState(kh, nabi::kStateKernelChStop, &args);
  v5_->stopEvent(kh);
  v5_->stopEvent(op);
  nabi::DescrV5 late = kernel_descr<nabi::DescrV5>(op, 1, t0);
  h = reinterpret_cast<void*>(0xbad);
  v5_->startEvent(ctx, &h, &late);
  EXPECT_EQ(h, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  m = model();
  // Counted exactly (no other test in this program produces these): 3 junk handles x 2 calls,
  // the second host stop, 2 calls on the stopped channel, 3 calls after the op was written.
  EXPECT_EQ(window_drops(m, "nccl_no_context"), 2u);
  EXPECT_EQ(window_drops(m, "nccl_orphan_kernel_ch"), 2u);
  EXPECT_EQ(window_drops(m, "nccl_stale_handle"), 12u);
}

TEST_F(NcclDriver, MissingChannelIsWrittenAfterATimeoutAndCounted) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabc8, &mask, "partial", 1, 2, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  nabi::DescrV5 d = coll_descr<nabi::DescrV5>(0, 4);  // announces 4 channels, 2 report
  void* op = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
  v5_->stopEvent(op);
  run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, op, 2, t0, t0 + 4000);
  RunModel m;
  auto ops = wait_for("000000000000abc8", [](auto& v) { return !v.empty(); }, &m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].gpu_end_ns - ops[0].gpu_start_ns, 4000);
  EXPECT_GE(window_drops(m, "nccl_missing_channels"), 1u);
}

TEST_F(NcclDriver, ManyThreadsManyCommunicators) {
  constexpr int kThreads = 4, kOps = 400;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      void* ctx = nullptr;
      int mask = 0;
      v5_->init(&ctx, 0xbb00 + t, &mask, "mt", 1, 2, 1, nullptr);
      // Each communicator's "proxy" works on its own thread, as in NCCL.
      std::vector<void*> ops(kOps);
      for (int i = 0; i < kOps; ++i) {
        nabi::DescrV5 d = coll_descr<nabi::DescrV5>(i, 2);
        v5_->startEvent(ctx, &ops[i], &d);
        v5_->stopEvent(ops[i]);
        if (!ops[i]) failed = true;
      }
      std::thread proxy([&] {
        for (int i = 0; i < kOps; ++i) {
          uint64_t s = t0 + uint64_t(i) * 10'000;
          for (int c = 0; c < 2; ++c) {
            nabi::DescrV5 k = kernel_descr<nabi::DescrV5>(ops[i], c, s);
            void* h = nullptr;
            v5_->startEvent(ctx, &h, &k);
            nabi::StateArgs a{};
            a.kernelCh.pTimer = s + 2000;
            v5_->recordEventState(h, nabi::kStateKernelChStop, &a);
            v5_->stopEvent(h);
          }
        }
      });
      proxy.join();
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed);
  for (int t = 0; t < kThreads; ++t) {
    char id[24];
    snprintf(id, sizeof id, "%016x", 0xbb00 + t);
    auto ops = wait_for(id, [](auto& v) { return v.size() >= kOps; });
    std::set<uint64_t> seqs;
    for (const Collective& c : ops) {
      seqs.insert(c.seq);
      EXPECT_EQ(c.gpu_end_ns - c.gpu_start_ns, 2000);
    }
    EXPECT_EQ(seqs.size(), size_t{kOps}) << id;
  }
}

// Issue 27: the Group event numbers NCCL's plan; its collectives (v5: parentGroup; v4: parent)
// and p2p ops carry the number, the same for ops of one plan.
TEST_F(NcclDriver, OpsOfOneGroupCarryThePlanNumber) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabca, &mask, "fsdp", 1, 2, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  uint64_t seq = 0;
  for (int plan = 0; plan < 3; ++plan) {
    nabi::DescrV5 group{};
    group.type = nabi::kGroup;
    void* group_handle = nullptr;
    ASSERT_EQ(v5_->startEvent(ctx, &group_handle, &group), 0);
    std::vector<void*> ops;
    for (int k = 0; k < 2; ++k) {  // a ReduceScatter and an AllGather coalesced
      nabi::DescrV5 d = coll_descr<nabi::DescrV5>(seq++, 1);
      d.coll.func = k ? "AllGather" : "ReduceScatter";
      d.coll.parentGroup = group_handle;
      void* op = nullptr;
      ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
      ops.push_back(op);
    }
    for (void* op : ops) v5_->stopEvent(op);
    v5_->stopEvent(group_handle);
    for (void* op : ops) run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, op, 1, t0 + plan * 1000, t0 + plan * 1000 + 500);
  }
  auto ops = wait_for("000000000000abca", [](auto& v) { return v.size() >= 6; });
  ASSERT_EQ(ops.size(), 6u);
  std::map<uint64_t, uint64_t> group_of;
  for (const Collective& c : ops) group_of[c.seq] = c.group;
  EXPECT_NE(group_of[0], 0u);
  EXPECT_EQ(group_of[0], group_of[1]);
  EXPECT_EQ(group_of[2], group_of[3]);
  EXPECT_NE(group_of[1], group_of[2]);
  EXPECT_NE(group_of[3], group_of[4]);
}

// Issue 27: on NCCL 2.29+ (v6 table) a group's Broadcasts from two roots shift the
// communicator's kernel work counter (NVIDIA/nccl#2368). NCCL sends only CollApi events for them;
// later ops of that communicator are flagged, and (this program asks for kernel events with
// LAGGARD_NCCL_KERNEL_EVENTS=1) their GPU times kept for the curious, never used for blame.
TEST_F(NcclDriver, BroadcastsFromTwoRootsFlagTheCommunicatorsLaterOps) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v6_->init(&ctx, 0xabcb, &mask, "tp", 1, 2, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  auto collective = [&](uint64_t seq) {
    nabi::DescrV6 d = coll_descr<nabi::DescrV6>(seq, 1);
    void* op = nullptr;
    v6_->startEvent(ctx, &op, &d);
    v6_->stopEvent(op);
    run_channels<nabi::ProfilerV6, nabi::DescrV6>(v6_, ctx, op, 1, t0 + seq * 1000, t0 + seq * 1000 + 500);
  };
  auto broadcasts = [&](std::vector<int> roots) {
    nabi::DescrV6 api{};
    api.type = nabi::kGroupApi;
    void* api_handle = nullptr;
    v6_->startEvent(ctx, &api_handle, &api);
    for (int root : roots) {
      nabi::DescrV6 b{};
      b.type = nabi::kCollApi;
      b.parentObj = api_handle;
      b.collApi.func = "Broadcast";
      b.collApi.root = root;
      void* h = reinterpret_cast<void*>(0xbad);
      v6_->startEvent(ctx, &h, &b);
      EXPECT_EQ(h, nullptr);
    }
    v6_->stopEvent(api_handle);
  };
  collective(0);
  broadcasts({0});
  broadcasts({1});  // one root per group: nothing shifts
  collective(1);
  broadcasts({0, 1});
  collective(2);
  auto ops = wait_for("000000000000abcb", [](auto& v) { return v.size() >= 3; });
  ASSERT_EQ(ops.size(), 3u);
  for (const Collective& c : ops) {
    EXPECT_EQ(c.gpu_shifted, c.seq == 2) << c.seq;
    EXPECT_EQ(c.gpu_end_ns - c.gpu_start_ns, 500) << c.seq;
  }
}

// Issue 27: p2p ops are timed, numbered per peer, so a pipeline's sends meet their receives.
TEST_F(NcclDriver, P2pOpsAreTimedAndNumbered) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xabcc, &mask, "pp", 1, 4, 1, nullptr), 0);
  const uint64_t t0 = static_cast<uint64_t>(epoch_ns());
  for (int i = 0; i < 4; ++i) {
    nabi::DescrV5 p{};
    p.type = nabi::kP2p;
    p.rank = 1;
    p.p2p.func = i % 2 ? "Recv" : "Send";
    p.p2p.datatype = "ncclBfloat16";
    p.p2p.count = 1024;
    p.p2p.peer = i % 2 ? 0 : 2;
    p.p2p.nChannels = 1;
    void* h = nullptr;
    ASSERT_EQ(v5_->startEvent(ctx, &h, &p), 0);
    ASSERT_NE(h, nullptr);
    v5_->stopEvent(h);
    run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, h, 1, t0 + i * 1000, t0 + i * 1000 + 300);
  }
  auto ops = wait_for("000000000000abcc", [](auto& v) { return v.size() >= 4; });
  ASSERT_EQ(ops.size(), 4u);
  RunModel m = model();
  for (const Collective& c : ops) {
    EXPECT_TRUE(c.p2p);
    EXPECT_EQ(c.gpu_end_ns - c.gpu_start_ns, 300);
    EXPECT_EQ(c.bytes, 2048u);
    const bool send = m.strings.at(c.func) == "Send";
    EXPECT_EQ(c.peer, send ? 2 : 0);
  }
  std::multiset<uint64_t> seqs;
  for (const Collective& c : ops) seqs.insert(c.seq);
  EXPECT_EQ(seqs, (std::multiset<uint64_t>{0, 0, 1, 1}));
}

// Issue 27: jobs that re-create communicators (elastic restarts, evaluation groups) go past the
// 1024 contexts a process once had: destroyed communicators' contexts are reused.
TEST_F(NcclDriver, MoreCommunicatorsThanContextsOverALifetime) {
  int created = 0, waits = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 1100 && std::chrono::steady_clock::now() < deadline; ++i) {
    void* ctx = nullptr;
    int mask = 0;
    v5_->init(&ctx, 0xc0000 + i, &mask, "eval", 1, 2, 1, nullptr);
    if (!ctx) {  // all in use: the flush thread frees destroyed ones a second after their finalize
      ++waits;
      --i;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    ++created;
    EXPECT_EQ(v5_->finalize(ctx), 0);
  }
  EXPECT_EQ(created, 1100);
  EXPECT_GT(waits, 0);  // the first 1024 (less the other tests') filled the table once
}

// fork() in a process whose NCCL is mid-collective (a data loader worker, a subprocess launcher):
// the child has no flush thread and must not record into the parent's pool, yet NCCL code in the
// child may still call the table with the parent's context and handles, or init a communicator of
// its own (nccl_source.cpp on_fork_child). Nothing there may crash or hang the child, and the
// parent's operation, finished after the fork, is recorded as usual.
TEST_F(NcclDriver, AForkedChildCallsWithTheParentsHandlesAndItsOwnWithoutHarm) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v5_->init(&ctx, 0xf0c1, &mask, "forked", 2, 2, 1, nullptr), 0);
  ASSERT_NE(ctx, nullptr);
  nabi::DescrV5 group{};
  group.type = nabi::kGroup;
  void* group_handle = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &group_handle, &group), 0);
  nabi::DescrV5 d = coll_descr<nabi::DescrV5>(0, 2);
  d.coll.parentGroup = group_handle;
  void* op = nullptr;
  ASSERT_EQ(v5_->startEvent(ctx, &op, &d), 0);
  ASSERT_NE(op, nullptr);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);  // a hang in here ends as SIGALRM, which the parent reports
    // The parent's operation, as the child's copy of NCCL would go on with it.
    v5_->stopEvent(op);
    v5_->stopEvent(group_handle);
    for (int c = 0; c < 2; ++c) {
      nabi::DescrV5 k = kernel_descr<nabi::DescrV5>(op, static_cast<uint8_t>(c), 1000);
      void* h = nullptr;
      v5_->startEvent(ctx, &h, &k);
      nabi::StateArgs a{};
      a.kernelCh.pTimer = 2000;
      v5_->recordEventState(h, nabi::kStateKernelChStop, &a);
      v5_->stopEvent(h);
    }
    // A communicator of its own, and a whole collective on it.
    void* own = nullptr;
    int own_mask = 0;
    v5_->init(&own, 0xf0c2, &own_mask, "child", 1, 2, 1, nullptr);
    // The child's NCCL is its own: laggard stays out of it (no context, NCCL asked for no event).
    if (own != nullptr || own_mask != 0) _exit(3);
    nabi::DescrV5 g2{};
    g2.type = nabi::kGroup;
    void* g2_handle = nullptr;
    v5_->startEvent(own, &g2_handle, &g2);
    nabi::DescrV5 d2 = coll_descr<nabi::DescrV5>(0, 1);
    d2.coll.parentGroup = g2_handle;
    void* op2 = nullptr;
    v5_->startEvent(own, &op2, &d2);
    v5_->stopEvent(op2);
    v5_->stopEvent(g2_handle);
    v5_->finalize(own);
    v5_->finalize(ctx);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child " << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exit " + std::to_string(WEXITSTATUS(status)));

  ASSERT_EQ(v5_->stopEvent(op), 0);
  ASSERT_EQ(v5_->stopEvent(group_handle), 0);
  std::thread proxy([&] {
    const uint64_t start = static_cast<uint64_t>(epoch_ns()) - 60'000;
    run_channels<nabi::ProfilerV5, nabi::DescrV5>(v5_, ctx, op, 2, start, start + 50'000);
  });
  proxy.join();
  auto ops = wait_for("000000000000f0c1", [](auto& v) { return !v.empty(); });
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].channels, 2);
  EXPECT_EQ(v5_->finalize(ctx), 0);
}

}  // namespace
