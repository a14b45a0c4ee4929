// Who everyone waited for: the cross-rank analysis of NCCL collectives. In a synchronous job
// every rank's step takes as long as the slowest rank's, so step times cannot tell the culprit
// from its victims; the collectives can. Operations are matched across their ranks and joined
// into exchanges (nccl_exchanges.h: a collective, a group of them run in one kernel, a Send/Recv
// pair), and the GPU start times say who arrived when:
//   wait(rank)  = last arrival - its arrival (its kernel time minus the time after the last
//                 arrival: what it spent waiting for others)
//   blame(rank) = the waits of the others, credited to the rank(s) that arrived last
// A rank that arrived last because its previous exchange made it wait (a pipeline stage waiting
// for the stage before) passes that part of the blame on to whom it waited for, and is not
// counted as last for it. Clocks of different GPUs are aligned first (clock_offsets.h), and
// checked against the host callbacks of GPUs on one host. A pure function of the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model.h"
#include "scores.h"

namespace laggard::report {

struct CommOptions {
  // A rank "arrived last" in a collective when it arrived within lead_floor of the latest
  // arrival, and the latest arrival came at least lead_floor after the earliest: arrivals closer
  // than that are noise (launch jitter, clock alignment), and nobody arrived last.
  double lead_floor_ns = 20'000;
  // The same for host-timed exchanges (enqueue times: a CPU's scheduling jitter is larger).
  double host_lead_floor_ns = 1'000'000;
  // "Persistently last" (a straggler of scope "comm"): last in at least min_last of at least
  // min_collectives matched collectives of a communicator, and in a share of them at least
  // halfway between chance (1/n for n ranks) and always: share >= (1 + 1/n) / 2.
  int min_collectives = 20;
  int min_last = 10;
  // Slow collective: bus bandwidth below slow_factor x the job's median for the same function
  // and size (power-of-two bucket), where at least slow_min_samples collectives share that size.
  double slow_factor = 0.5;
  int slow_min_samples = 8;
  size_t slow_listed = 10;  // examples kept per communicator, slowest first
  size_t worst_listed = 10; // collectives with the most total waiting, kept in full detail
  // Fit each rank's GPU clock to the collectives' end times (clock_offsets.h). Off for
  // host-timed collectives (host_collectives.h): the ranks of a host share one clock.
  bool fit_clocks = true;
};

struct CommRankStats {
  int rank = -1;
  std::string host;
  uint64_t collectives = 0;   // matched collectives it took part in
  uint64_t last = 0;          // ... in which it arrived last
  double blame_ns = 0;        // time it made others wait
  double waited_ns = 0;       // time it waited for others
  double kernel_ns = 0;       // GPU time of its collective kernels
  // How much later than the median rank it arrived, median over the collectives in which it
  // arrived last: the time a collective lost to it, whatever the rank count (blame_ns sums
  // every waiting rank's time and grows with it).
  double lateness_ns = 0;
  // Its GPU clock against the reference rank's (clock_offsets.h): subtracted from its GPU times.
  // A process driving several GPUs: its first GPU's (the others are in gpu_clocks).
  double clock_offset_ns = 0;    // at the clock reference time
  double clock_drift_ppm = 0;
  double clock_residual_ns = 0;  // median |end - fitted end| of its collectives
  uint64_t clock_samples = 0;
  std::string clock_source = "fit";  // "fit", or "host callbacks" where they corrected the fit
  // How much later than the others its symmetric collectives end, median (after alignment): a
  // GPU that finishes late (a slow GPU) rather than a clock that reads ahead.
  double late_end_ns = 0;
  struct GpuClock {               // every GPU of the rank's process, when it drives several
    int device = -1;
    double offset_ns = 0, drift_ppm = 0;
    uint64_t samples = 0;
  };
  std::vector<GpuClock> gpu_clocks;
  int64_t gpu_shift_ns = 0;      // fallback shift the reader applied to this GPU (far from the host clock)
  uint64_t suspect = 0;          // its ops whose GPU times stayed out (partial, timestamps of other work)
  uint64_t p2p_ops = 0, p2p_bytes = 0;
  double p2p_gpu_ns = 0;         // version 3 files only (p2p ops listed one by one)
  std::string nccl_plugin;       // what NCCL did with the plugin: "v5 table, kernel events on", ...
};

struct SlowCollective {
  uint32_t func = StringTable::kNone;
  uint64_t seq = 0, bytes = 0;
  int64_t last_arrival_ns = 0;  // on the reference clock
  double transfer_ns = 0;       // latest end - last arrival: the data movement once all were there
  double algbw_gbps = 0, busbw_gbps = 0, median_busbw_gbps = 0;
  std::vector<int> last_ranks;
};

// One matched collective in full: who arrived when, who waited how long.
struct CollectiveDetail {
  uint32_t comm = StringTable::kNone, func = StringTable::kNone;  // of its first operation
  uint64_t seq = 0, bytes = 0;
  size_t ops = 1;                    // operations in it (a group run in one kernel, a Send/Recv pair)
  bool p2p = false, host_timed = false;
  std::vector<int> blamed_ranks;     // whom the waiting is credited to (last_ranks, or whom they waited for)
  int64_t first_arrival_ns = 0;      // on the reference clock
  std::vector<int> ranks;            // global ranks, by communicator rank
  std::vector<double> arrival_ns;    // after the first arrival, by communicator rank
  std::vector<double> wait_ns;       // by communicator rank
  std::vector<int> last_ranks;
  double total_wait_ns = 0, transfer_ns = 0, algbw_gbps = 0, busbw_gbps = 0;
};

struct CommSummary {
  uint32_t comm = StringTable::kNone;  // id (hash in hex)
  uint32_t name = StringTable::kNone;
  int nranks = 0;
  std::vector<int> ranks;              // global ranks seen in it, by communicator rank
  uint64_t collectives = 0;            // matched on every rank with GPU times (or host timed)
  uint64_t incomplete = 0;             // seen on some ranks only, or without GPU times
  uint64_t suspect = 0;                // ... of those: left out for suspect GPU times on some rank
  uint64_t shifted = 0;                // ... of those: NCCL shifted the work counter, ranks on several hosts
  uint64_t arrivals = 0;               // exchanges scored: collectives, groups in one kernel, p2p pairs
  uint64_t p2p_pairs = 0;              // Send/Recv pairs matched
  uint64_t host_timed = 0;             // exchanges whose arrivals are the ranks' enqueue times
  // Sequence numbers (per function) missing between the first and the last one some rank saw:
  // collectives of a kind the plugin sees that it did not see, or dropped. Kinds NCCL never
  // reports leave no gap (docs/report.md: symmetric-memory and copy-engine collectives,
  // Broadcast on 2.29+, graph-captured ones without kernel events).
  uint64_t seq_gaps = 0;
  double last_share_threshold = 1;     // (1 + 1/n) / 2
  struct PerRank {
    int rank = -1;
    uint64_t last = 0;
    uint64_t arrivals = 0;             // exchanges it took part in
    double chance = 0;                 // sum of 1/(members) over them: how often it would be last by chance
    double last_share = 0, blame_ns = 0, waited_ns = 0;
    double last_share_threshold = 1;   // (1 + chance / arrivals) / 2
  };
  std::vector<PerRank> per_rank;
  uint64_t slow_count = 0;
  std::vector<SlowCollective> slow;    // slowest first, at most options.slow_listed
};

struct CommReport {
  CommOptions options;
  uint64_t ops = 0;                    // every NCCL operation read (collectives and p2p)
  uint64_t matched = 0, incomplete = 0, p2p = 0;
  uint64_t suspect = 0;                // collectives left out for suspect GPU times (also in incomplete)
  uint64_t shifted = 0;                // ... for a shifted work counter, not host timed (also in incomplete)
  uint64_t arrivals = 0, p2p_pairs = 0, host_timed = 0;
  std::vector<CommRankStats> ranks;    // one per model rank, in model order
  std::vector<CommSummary> comms;
  struct Clock {
    bool corrected = false;            // per-rank (per-GPU) offsets and drifts were applied
    int reference_rank = -1;
    int64_t reference_time_ns = 0;     // where the offsets apply (drift is relative to it)
    double max_abs_offset_ns = 0, max_abs_drift_ppm = 0, residual_ns = 0;
    uint64_t samples = 0;
    struct Host {                      // per host: median and spread of its GPUs' offsets
      std::string host;
      double offset_ns = 0, spread_ns = 0;
      std::vector<int> ranks;
    };
    std::vector<Host> hosts;
    std::vector<int> callback_corrected;  // ranks whose offset the host callbacks corrected
  } clock;
  std::vector<Straggler> stragglers;   // scope "comm", metric "last_arrival"
  std::vector<CollectiveDetail> worst; // the most total waiting first, at most options.worst_listed
  // Issue 25 (host_collectives.h): "host" when this report is of collectives timed on the host
  // (NVTX ranges named <op>@<group>) rather than NCCL's records. Its string ids then index
  // host_model's strings (the run's ranks, holding only those collectives): see comm_strings.
  std::string source = "nccl";
  std::shared_ptr<const RunModel> host_model;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> host_waits;  // per rank index: waits (epoch ns), sorted
};

// The model whose strings the report's ids index: `run`, or the host-timed collectives' own.
inline const RunModel& comm_strings(const RunModel& run, const CommReport& rep) {
  return rep.host_model ? *rep.host_model : run;
}

// scores: for the report windows (when the straggler was last). Never throws for odd data.
CommReport analyze_collectives(const RunModel& model, const ScoreReport& scores, const CommOptions& options = {});

// nccl-tests' bus bandwidth factor for `func` over n ranks (1 for anything else).
double bus_factor(const std::string& func, int n);
// nccl-tests' "size" for algorithm bandwidth: NCCL reports AllGather per rank and
// ReduceScatter per rank (recvcount), the others whole.
double algbw_bytes(const std::string& func, uint64_t bytes, int n);

}  // namespace laggard::report
