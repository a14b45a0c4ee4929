// The NCCL source's core, independent of the plugin interface version: communicators, a pool
// of in-flight operations, the callbacks' effects on them, and the flush-thread side that turns
// finished operations into window records. plugin_tables.cpp adapts NCCL's v4/v5/v6 tables to it.
//
// Threads: add_comm/finalize_comm on NCCL's init threads; start/stop/record on the user's
// threads, NCCL's proxy threads and CUDA host-callback threads, all at once; harvest and
// take_window on laggard's flush thread only.
//
// Handles given to NCCL are not pointers but encoded (kind, slot, generation, channel) words.
// NCCL never dereferences them, and late or repeated calls with an old handle (NCCL reuses
// stale handle slots, see NCCL issue #2221) are recognized by the generation and ignored. Group
// and GroupApi handles carry a number instead of a slot: NCCL's plan, per communicator (the
// parent every op of the plan names), and a per-call id that tells one group's Broadcasts apart.
//
// Nothing on the callback threads is counted in a variable all of them write (issue 29): the
// hang watchdog's NCCL progress is the flush thread's harvest seeing ops start, move and finish.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hang_report.h"
#include "index_queue.h"
#include "nccl_window.h"
#include "string_cache.h"

namespace laggard::nccl {

struct CollInfo {
  uint64_t seq = 0;
  const char* func = nullptr;
  uint64_t count = 0;
  int root = -1;
  const char* datatype = nullptr;
  uint8_t nchannels = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  void* group = nullptr;  // the Group event's handle (NCCL's plan): parentGroup (v5+), parentObj (v4)
};

struct P2pInfo {
  const char* func = nullptr;
  uint64_t count = 0;
  int peer = -1;
  const char* datatype = nullptr;
  uint8_t nchannels = 0;
  void* group = nullptr;
};

struct ProfilerOptions {
  uint32_t pool_slots = 8192;              // in-flight operations; a power of two
  uint32_t max_comms = 1024;               // live communicators (a destroyed one's context is reused)
  size_t max_ops_per_window = 50000;
  // Timed p2p operations per NCCL plan (one ncclGroupStart/End), and running per communicator: a
  // pipeline's sends and receives (one or two per plan) are timed however far its GPU lags; of an
  // all-to-all's hundreds in one plan, the first p2p_timed_per_plan are (one arrival per rank
  // needs no more), the rest only counted: they would crowd out the collectives' slots and the
  // files.
  uint32_t p2p_timed_per_plan = 16;
  uint32_t p2p_timed_per_comm = 512;
  // Waiting for GPU channel events. Timeouts count from the GPU's progress on the operation's
  // communicator, not from the launch: a GPU seconds behind its CPU keeps its times.
  // - no channel started, and a later operation of the communicator already reached the GPU
  //   (this one never will: NCCL gave it no channel events): given up after partial_timeout_ns;
  // - no channel started, and the communicator's GPU quiet for no_kernel_timeout_ns;
  // - every started channel stopped but fewer than announced: partial_timeout_ns after the last;
  // - anything still open after stuck_timeout_ns.
  int64_t no_kernel_timeout_ns = 10'000'000'000;
  int64_t partial_timeout_ns = 1'000'000'000;
  int64_t stuck_timeout_ns = 120'000'000'000;
  // A destroyed communicator's context is reused this long after its finalize (and once its
  // operations are written): NCCL's proxy may still report its last operations.
  int64_t comm_reuse_after_ns = 1'000'000'000;
  // Whether NCCL was asked for KernelCh events (plugin_env.h, decide_kernel_events). Without
  // them an operation is finished when its host stop arrives.
  bool kernel_events = true;
  std::string kernel_events_status = "on";
  // LAGGARD_NCCL_KERNEL_EVENTS=1: keep GPU times NCCL is known to have shifted (flagged), instead
  // of ignoring them.
  bool keep_shifted = false;
};

// Bytes per element of an NCCL datatype name; 0 for a name it does not know. Thread-safe.
uint8_t element_size_of(const char* datatype);

class Profiler {
 public:
  Profiler(const ProfilerOptions& options, int64_t epoch_offset_ns);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // A context for NCCL, or null (too many live communicators; counted). table_version: the
  // plugin table NCCL called init through. device: the CUDA device of the calling thread, -1.
  void* add_comm(uint64_t hash, const char* name, int nnodes, int nranks, int rank, int table_version = 0,
                 int device = -1);
  // The communicator is destroyed: its context is reused once its operations are written.
  void finalize_comm(void* context);

  // Hot path. Each returns the handle to give NCCL; null drops the event (children of a null
  // handle arrive with a null parent and are counted as orphans).
  void* start_coll(void* context, const CollInfo& info);
  // P2p operations are timed while few of their plan's were (p2p_timed_per_plan) and their
  // communicator has room (p2p_timed_per_comm); the others are counted and answered with a handle
  // without state.
  void* start_p2p(void* context, const P2pInfo& info);
  void* start_kernel_ch(void* parent, uint8_t channel, uint64_t gpu_start);
  // NCCL's plan (one kernel): its handle numbers the plan per communicator, and every
  // collective and p2p operation of the plan names it as its group (profiler.cc,
  // ncclProfilerStartGroupEvent/StartTaskEvents). A null context gets a handle without state.
  void* start_group(void* context);
  // The outermost ncclGroupStart/End (or lone call) of a thread: a handle unique per call.
  static void* group_api_handle();
  // A collective API call (CollApi event, v5+): notes Broadcasts that shift the
  // communicator's kernel work counter (see note_broadcast in profiler.cpp).
  void note_coll_api(void* context, const char* func, int root, void* group_api);
  static void* p2p_handle() { return reinterpret_cast<void*>(uintptr_t{kTagGroup | kKindP2p << 2}); }
  void record_kernel_ch_stop(void* handle, uint64_t gpu_stop);
  void stop(void* handle);

  // Flush thread: write finished (or timed-out) operations into the open window, free their
  // slots. final: the process is exiting, take everything as it is.
  void harvest(int64_t now_mono_ns, bool final);
  // Flush thread: the open window's operations, communicators, strings and drop counts.
  NcclWindow take_window();

  uint32_t comm_count() const;
  bool kernel_events() const { return kernel_events_.load(std::memory_order_relaxed); }
  // Stops asking for (and waiting for) KernelCh events from now on; `why` becomes the status.
  void switch_kernel_events_off(const std::string& why);
  void set_displaced(const std::string& what);
  // Flush thread: ops, channels or communicators changed since the last harvest (the hang
  // watchdog's NCCL progress; nothing is counted on the callbacks' threads).
  uint64_t progress() const { return progress_; }

  // Flush thread, for hang reports: operations in flight (and ones given up on while
  // incomplete), the last started and the last completed collective (watch_describe.cpp).
  CollectiveProgress describe() const;

 private:
  enum : uint32_t { kTagGroup = 1, kTagOp = 2, kTagKernel = 3 };
  // kTagGroup handles: bits 2-7 say what they stand for, bits 8-63 carry a number.
  enum : uint32_t { kKindPlain = 0, kKindP2p = 1, kKindPlan = 2, kKindGroupApi = 3 };
  enum : uint32_t { kLive = 1, kHostStopped = 2 };
  // A slot's gpu_start before any channel reported one (the minimum is taken over channels).
  static constexpr uint64_t kNoGpuStart = std::numeric_limits<uint64_t>::max();

  struct alignas(64) Slot {
    std::atomic<uint32_t> gen{0};         // odd while in use; a handle carries the gen it was issued with
    std::atomic<uint32_t> state{0};
    uint32_t comm = 0;
    std::atomic<uint64_t> chan_started{0}, chan_stopped{0};  // bit per channel
    std::atomic<uint64_t> gpu_start{0}, gpu_end{0};           // min / max over channels
    std::atomic<int64_t> host_end{0};
    std::atomic<int64_t> chan_host_start{0}, chan_host_stop{0};  // mono ns of the KernelCh callbacks
    int64_t host_start = 0;
    uint64_t seq = 0, count = 0, group = 0;
    int32_t root_or_peer = -1;
    uint16_t func = 0, datatype = 0, algo = 0, proto = 0;
    uint8_t nchannels = 0;
    bool p2p = false;
    bool expect_kernel = true;  // KernelCh events were asked for when it started
    bool shifted = false;       // its communicator's work counter was shifted before it started
    std::atomic<bool> p2p_running{false};  // a timed p2p op its communicator still counts as in flight
  };

  // One communicator. Fields are grouped by the thread that writes them.
  struct alignas(64) CommSlot {
    // add_comm / finalize_comm (NCCL's init threads) and the flush thread.
    std::atomic<uint32_t> state{0};  // kCommFree, kCommLive, kCommFinalized
    std::atomic<uint32_t> gen{0};    // bumped at each reuse
    int64_t finalized_mono = 0;
    uint64_t hash = 0;
    int nranks = 0, rank = -1, nnodes = 0, device = -1;
    int table_version = 0;
    char name[128] = {};
    // Per peer: Sends to it [0, nranks), Recvs from it [nranks, 2 nranks); the index of a p2p op.
    std::unique_ptr<std::atomic<uint32_t>[]> p2p_index;
    int p2p_peers = 0;
    // The threads that enqueue (the user's).
    alignas(64) std::atomic<uint64_t> sends{0}, recvs{0}, send_bytes{0}, recv_bytes{0};  // untimed p2p
    std::atomic<uint64_t> plans{0};
    // Timed p2p ops running (enqueued, GPU not done): a pipeline has a few, an all-to-all
    // hundreds at once. Released when the op's channels are done, or when it is written.
    std::atomic<uint32_t> p2p_timed{0};
    std::atomic<uint64_t> p2p_plan{0};        // the plan of the latest p2p op, and how many of it were timed
    std::atomic<uint32_t> p2p_timed_in_plan{0};
    std::atomic<uint64_t> bcast_group_api{0};
    std::atomic<int32_t> bcast_root{-1};
    std::atomic<bool> shifted{false};
    // NCCL's proxy thread: the GPU's progress on this communicator.
    alignas(64) std::atomic<int64_t> gpu_reached{0};   // host_start of the newest op a channel started for
    std::atomic<int64_t> gpu_event_mono{0};            // when the proxy last reported a channel start
  };
  enum : uint32_t { kCommFree = 0, kCommLive = 1, kCommFinalized = 2 };

  struct Counters {  // written by callback threads
    std::atomic<uint64_t> pool_full{0}, comms_overflow{0}, no_context{0}, orphan_kernel_ch{0}, stale_handle{0},
        shifted_kernel_ch{0};
  };
  static constexpr int kCounters = 6;

  struct Finished {  // a harvested operation, still in cache ids
    uint32_t comm;
    uint16_t func, datatype, algo, proto;
    bool p2p, shifted;
    int32_t root_or_peer;
    uint8_t nchannels, channels;
    uint64_t seq, count, group;
    int64_t host_start_mono, host_end_mono;
    uint64_t gpu_start, gpu_end;
    int64_t chan_host_start_mono, chan_host_stop_mono;
  };

  CommSlot* comm_of(void* context) const;
  uint32_t claim_comm_slot();  // an index, or max_comms when none is free
  Slot* slot_of(void* handle, uint32_t tag, uint32_t* channel) const;
  Slot* begin_op(CommSlot* comm);  // null (counted) without a free slot
  void* publish(Slot& s);
  bool give_up(const Slot& s, uint32_t state, uint64_t started, uint64_t stopped, int64_t quiet, int64_t now,
               bool pool_tight) const;
  void collect(uint32_t index, bool complete, bool final);
  void release_p2p(Slot& s);  // once per timed p2p op
  void reuse_finalized_comms(int64_t now);
  uint8_t element_size(uint16_t datatype);

  const ProfilerOptions opt_;
  const int64_t epoch_offset_ns_;
  std::unique_ptr<Slot[]> slots_;
  IndexQueue free_;
  std::unique_ptr<CommSlot[]> comms_;
  std::atomic<uint32_t> ncomms_{0};  // high-water mark of comm slots handed out
  IndexQueue free_comms_;            // finalized, written and quiet: reusable
  std::atomic<bool> kernel_events_;
  std::atomic<int> table_version_{0};
  std::atomic<uint64_t> inits_{0};
  StringCache strings_;
  Counters counters_;
  std::mutex status_mu_;             // the two status strings below
  std::string kernel_events_status_, displaced_;

  // Flush-thread state.
  struct Track {
    // Last seen progress of the slot; timeouts count from the last change (no counter on the
    // hot path: the channel masks and the state are the progress).
    uint32_t gen = 0, state = 0;
    uint64_t started = 0, stopped = 0;
    int64_t since = 0;
  };
  std::vector<Track> track_;
  std::vector<Finished> finished_;
  uint32_t live_ops_ = 0;           // slots in use at the last harvest
  uint64_t progress_ = 0;
  NcclDrops flush_drops_;           // window_full, no_gpu_time, ... of the open window
  uint64_t seen_[kCounters] = {};   // Counters at the last take_window
  struct CommSeen {                 // per communicator slot, at the last take_window
    uint32_t listed_gen = UINT32_MAX;  // the generation last listed in a window
    uint64_t sends = 0, recvs = 0, send_bytes = 0, recv_bytes = 0;
  };
  std::vector<CommSeen> comm_seen_;
  std::vector<int16_t> element_sizes_;  // by string id; -1: not looked up yet

  // Hang-report state. last_started_: slot index of the newest published op (any thread).
  std::atomic<uint32_t> last_started_{UINT32_MAX};
  // Flush thread: the newest op harvested complete, and recent ones given up on incomplete
  // (a stuck collective is harvested after stuck_timeout_ns but is still what the rank waits on).
  std::optional<Finished> last_completed_;
  std::vector<Finished> recent_incomplete_;
  CollectiveState state_of(const Finished& f, int64_t now_mono) const;
};

}  // namespace laggard::nccl
