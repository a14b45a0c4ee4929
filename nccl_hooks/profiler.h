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
// stale handle slots, see NCCL issue #2221) are recognized by the generation and ignored.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
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
};

struct P2pInfo {
  const char* func = nullptr;
  uint64_t count = 0;
  int peer = -1;
  const char* datatype = nullptr;
  uint8_t nchannels = 0;
};

struct ProfilerOptions {
  uint32_t pool_slots = 8192;              // in-flight operations; a power of two
  uint32_t max_comms = 1024;
  size_t max_ops_per_window = 50000;
  // An operation is written without waiting further when, after its host stop, it has been
  // quiet this long with no GPU channel started / with every started channel stopped but fewer
  // than it announced, or this long with anything at all still open.
  int64_t no_kernel_timeout_ns = 10'000'000'000;
  int64_t partial_timeout_ns = 1'000'000'000;
  int64_t stuck_timeout_ns = 120'000'000'000;
  // Whether NCCL was asked for KernelCh events (plugin_env.h, decide_kernel_events). Without
  // them an operation is finished when its host stop arrives.
  bool kernel_events = true;
  std::string kernel_events_status = "on";
};

// Bytes per element of an NCCL datatype name; 0 for a name it does not know. Thread-safe.
uint8_t element_size_of(const char* datatype);

class Profiler {
 public:
  Profiler(const ProfilerOptions& options, int64_t epoch_offset_ns);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // A context for NCCL, or null (too many communicators; counted). table_version: the plugin
  // table NCCL called init through.
  void* add_comm(uint64_t hash, const char* name, int nnodes, int nranks, int rank, int table_version = 0);
  void finalize_comm(void* context);

  // Hot path. Each returns the handle to give NCCL; null drops the event (children of a null
  // handle arrive with a null parent and are counted as orphans).
  void* start_coll(void* context, const CollInfo& info);
  // P2p operations take no slot (MoE all-to-alls would crowd the collectives out): they are
  // counted per communicator and answered with a handle that carries no state.
  void* start_p2p(void* context, const P2pInfo& info);
  void* start_kernel_ch(void* parent, uint8_t channel, uint64_t gpu_start);
  // Group events: NCCL 2.27 starts collectives only under a non-null group handle, and graph
  // replays keep seqNumber consistent only with one; this handle carries no state.
  static void* group_handle() { return reinterpret_cast<void*>(uintptr_t{kTagGroup}); }
  static void* p2p_handle() { return reinterpret_cast<void*>(uintptr_t{kTagGroup | 4}); }
  void record_kernel_ch_stop(void* handle, uint64_t gpu_stop);
  void stop(void* handle);

  // Flush thread: write finished (or timed-out) operations into the open window, free their
  // slots. final: the process is exiting, take everything as it is.
  void harvest(int64_t now_mono_ns, bool final);
  // Flush thread: the open window's operations, communicators, strings and drop counts.
  NcclWindow take_window();

  uint32_t comm_count() const;
  bool kernel_events() const { return opt_.kernel_events; }

  // Flush thread, for hang reports: operations in flight (and ones given up on while
  // incomplete), the last started and the last completed collective (watch_describe.cpp).
  CollectiveProgress describe() const;

 private:
  enum : uint32_t { kTagGroup = 1, kTagOp = 2, kTagKernel = 3 };
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
    uint64_t seq = 0, count = 0;
    int32_t root_or_peer = -1;
    uint16_t func = 0, datatype = 0, algo = 0, proto = 0;
    uint8_t nchannels = 0;
    bool p2p = false;
  };

  struct alignas(64) CommSlot {
    std::atomic<bool> ready{false};
    std::atomic<bool> finalized{false};
    uint64_t hash = 0;
    int nranks = 0, rank = -1, nnodes = 0;
    char name[128] = {};
    std::atomic<uint64_t> sends{0}, recvs{0}, send_bytes{0}, recv_bytes{0};
  };

  struct Counters {  // written by callback threads
    std::atomic<uint64_t> pool_full{0}, comms_overflow{0}, no_context{0}, orphan_kernel_ch{0}, stale_handle{0};
  };

  struct Finished {  // a harvested operation, still in cache ids
    uint32_t comm;
    uint16_t func, datatype, algo, proto;
    bool p2p;
    int32_t root_or_peer;
    uint8_t nchannels, channels;
    uint64_t seq, count;
    int64_t host_start_mono, host_end_mono;
    uint64_t gpu_start, gpu_end;
    int64_t chan_host_start_mono, chan_host_stop_mono;
  };

  CommSlot* comm_of(void* context) const;
  Slot* slot_of(void* handle, uint32_t tag, uint32_t* channel) const;
  Slot* begin_op(void* context);  // null (counted) without a context or a free slot
  void* publish(Slot& s);
  void collect(uint32_t index, bool complete, bool final);
  uint8_t element_size(uint16_t datatype);

  const ProfilerOptions opt_;
  const int64_t epoch_offset_ns_;
  std::unique_ptr<Slot[]> slots_;
  IndexQueue free_;
  std::unique_ptr<CommSlot[]> comms_;
  std::atomic<uint32_t> ncomms_{0};
  std::atomic<bool> kernel_seen_{false};  // any GPU channel event yet (else NCCL sends none)
  std::atomic<int> table_version_{0};
  std::atomic<uint64_t> inits_{0};
  StringCache strings_;
  Counters counters_;

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
  NcclDrops flush_drops_;           // window_full, no_gpu_time, ... of the open window
  uint64_t seen_[5] = {};           // Counters at the last take_window
  uint32_t comms_written_ = 0;      // communicators already listed in an earlier window
  struct P2pSeen {
    uint64_t sends = 0, recvs = 0, send_bytes = 0, recv_bytes = 0;
  };
  std::vector<P2pSeen> p2p_seen_;   // per communicator: counts at the last take_window
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
