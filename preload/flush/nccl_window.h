// NCCL operations a window closes with, as plain data for the writer (docs/schema.md, "nccl").
// Produced by nccl_hooks/ on the flush thread; the writer knows nothing else about NCCL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laggard {

struct NcclCommInfo {
  uint64_t hash = 0;     // NCCL's commHash: the same on every rank of the communicator
  std::string name;      // config.commName; empty when NCCL passed none
  int nranks = 0, rank = -1, nnodes = 0;
  int device = -1;       // CUDA device the communicator was created on (cuCtxGetDevice at init); -1: unknown
};

constexpr uint32_t kNcclNoString = 0xffffffffu;

struct NcclOp {
  uint32_t comm = 0;                        // index into NcclWindow::comms
  uint32_t func = kNcclNoString;            // indices into NcclWindow::strings
  uint32_t datatype = kNcclNoString;
  uint32_t algo = kNcclNoString, proto = kNcclNoString;  // collectives only
  bool p2p = false;
  int32_t root = -1, peer = -1;             // root: collectives; peer: p2p
  // Collectives: NCCL's seqNumber (per comm and func). P2p: this op's index among the rank's
  // Sends to (Recvs from) `peer` on this communicator, counted over every one of them: NCCL
  // matches a pair's sends and receives in order, so index k of a Send is index k of the Recv.
  uint64_t seq = 0;
  // NCCL's plan (one kernel) this op ran in: ops of one ncclGroupStart/End share it and run
  // in one kernel, their GPU times overlap. Per communicator, counted from 1; 0: unknown.
  uint64_t group = 0;
  // The communicator's kernel work counter was shifted before this op (NCCL 2.29+ Broadcast
  // from several roots in one group, NVIDIA/nccl#2368): GPU times are another work's, if any.
  bool gpu_shifted = false;
  uint64_t count = 0, bytes = 0;            // bytes = count x element size
  uint8_t nchannels = 0;                    // channels NCCL said the op uses
  uint8_t channels = 0;                     // channels whose GPU stop arrived
  // NCCL's Coll start/stop events: they bracket the plan's proxy-op upload (enqueue.cc,
  // hostStreamPlanTask), which runs after the kernel launch on the eager path and in a host
  // callback at graph replay. Not the enqueue. Epoch ns; end 0: unknown.
  int64_t upload_start_ns = 0, upload_end_ns = 0;
  uint64_t gpu_start = 0, gpu_end = 0;      // GPU %globaltimer ns, raw; 0: unknown
  // Host time (epoch ns) of the first channel's KernelCh start callback and of the stop callback
  // that completed the announced channels; 0: none. NCCL's proxy reads a GPU timestamp before
  // it calls back, so a GPU time later than these (on the GPU's clock) is not this op's.
  int64_t chan_host_start_ns = 0, chan_host_stop_ns = 0;
};

// P2p operations not listed in ops (beyond the timed ones a communicator may have in flight):
// per communicator, only counted.
struct NcclP2pCounts {
  uint32_t comm = 0;  // index into NcclWindow::comms
  uint64_t sends = 0, recvs = 0, send_bytes = 0, recv_bytes = 0;
};

// Counted, never silent. Per window.
struct NcclDrops {
  uint64_t pool_full = 0;          // ops not recorded: every event slot was in use
  uint64_t window_full = 0;        // ops recorded but not written: the window's cap was reached
  uint64_t comms_overflow = 0;     // communicators not tracked: too many
  uint64_t no_context = 0;         // events for a communicator laggard does not track
  uint64_t orphan_kernel_ch = 0;   // GPU channel events whose op was dropped, unknown or already written
  uint64_t stale_handle = 0;       // stop/state calls on handles already finished or never issued
  uint64_t no_gpu_time = 0;        // ops written without GPU times (no channel event arrived)
  uint64_t missing_channels = 0;   // ops written with fewer channel stops than channels
  uint64_t bad_gpu_time = 0;       // ops whose GPU stop preceded the start (times discarded)
  uint64_t unfinished_at_exit = 0; // ops still in flight at the final flush (written as they were)
  uint64_t shifted_kernel_ch = 0;  // GPU channel events ignored: their communicator's work counter is shifted

  NcclDrops& operator+=(const NcclDrops& o);
};

struct NcclWindow {
  bool active = false;             // NCCL loaded the plugin: write the "nccl" object
  int table_version = 0;           // the plugin table NCCL called init through (4, 5, 6); 0: none yet
  uint64_t inits = 0;              // communicators NCCL initialized the plugin for, so far
  std::string kernel_events;       // "on" or "off: why": whether KernelCh events were asked for (now)
  // Another profiler plugin NCCL would have loaded had laggard not set NCCL_PROFILER_PLUGIN
  // ("libnccl-profiler.so in /dir", ...); empty: none found.
  std::string displaced;
  std::vector<NcclP2pCounts> p2p;  // this window's p2p counts, per communicator that had any
  std::vector<NcclCommInfo> comms; // referenced by ops, plus communicators created in this window
  std::vector<std::string> strings;
  std::vector<NcclOp> ops;         // completed in this window
  NcclDrops dropped;
};

}  // namespace laggard
