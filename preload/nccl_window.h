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
};

constexpr uint32_t kNcclNoString = 0xffffffffu;

struct NcclOp {
  uint32_t comm = 0;                        // index into NcclWindow::comms
  uint32_t func = kNcclNoString;            // indices into NcclWindow::strings
  uint32_t datatype = kNcclNoString;
  uint32_t algo = kNcclNoString, proto = kNcclNoString;  // collectives only
  bool p2p = false;
  int32_t root = -1, peer = -1;             // root: collectives; peer: p2p
  uint64_t seq = 0;                         // collectives: NCCL's seqNumber (per comm and func)
  uint64_t count = 0, bytes = 0;            // bytes = count x element size
  uint8_t nchannels = 0;                    // channels NCCL said the op uses
  uint8_t channels = 0;                     // channels whose GPU stop arrived
  int64_t host_start_ns = 0, host_end_ns = 0;  // enqueue on the host, epoch ns; end 0: unknown
  uint64_t gpu_start = 0, gpu_end = 0;      // GPU %globaltimer ns, raw; 0: unknown
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

  NcclDrops& operator+=(const NcclDrops& o);
};

struct NcclWindow {
  bool active = false;             // NCCL loaded the plugin: write the "nccl" object
  std::vector<NcclCommInfo> comms; // referenced by ops, plus communicators created in this window
  std::vector<std::string> strings;
  std::vector<NcclOp> ops;         // completed in this window
  NcclDrops dropped;
};

}  // namespace laggard
