// Who met whom in NCCL: every rank's NCCL operations matched across ranks and joined into
// exchanges, each with one arrival per rank. What real NCCL does that this models:
// - a collective is the same on its ranks by (communicator, function, seqNumber);
// - a p2p Send and the Recv it meets are the k-th Send of one rank to a peer and the k-th Recv
//   of that peer from it (NCCL matches a pair's operations in order; the capture numbers them);
// - operations of one ncclGroupStart/End run in one kernel (one NCCL plan, Collective::group):
//   they start together and their GPU times overlap, so the ranks arrive at the group once.
//   Operations matched across ranks and sharing a plan on any rank are one exchange (MoE
//   all-to-alls become one exchange of every rank);
// - a rank's GPU times are trusted only when the checks let them through (gpu_time_suspect) and
//   NCCL did not shift its work counter (Collective::gpu_shifted). Where a communicator's GPU
//   times are unusable for that reason and all its ranks share one host, the ranks' enqueue
//   times (NCCL's plan upload, one host clock) are the arrivals instead: "host timed".
// A pure function of the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "clock_offsets.h"
#include "model.h"

namespace laggard::report {

// A 64-bit key read from files, mixed for an unordered container (the NCCL analyses' matching and
// sequence numbers): the identity hash puts evenly spaced values into few buckets.
inline size_t mix_bits(uint64_t h) { return static_cast<size_t>((h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull); }

// One GPU's clock: a rank's, or one of the GPUs of a process that drives several.
struct ClockUnit {
  size_t rank = 0;  // index into model.ranks
  int device = -1;  // CUDA device of its communicators (-1: unknown, the process's only GPU)
};

struct ExchangeMember {
  size_t rank = 0, unit = 0;  // model rank index, clock unit index
  int comm_rank = -1;
  int64_t start = 0, end = 0;  // earliest start, latest end of its operations: GPU clock of its unit
                               // (raw), or host epoch ns when the exchange is host timed
};

struct Exchange {
  uint32_t comm = StringTable::kNone;  // communicator id
  uint32_t func = StringTable::kNone;  // of its first operation (by function and seq)
  uint64_t seq = 0;
  int nranks = 0;                      // communicator size
  size_t ops = 0;                      // operations matched across ranks in it
  bool p2p = false;                    // Send/Recv pairs only
  bool symmetric = false;              // AllReduce/AllGather/ReduceScatter only: ends together on all ranks
  bool host_timed = false;
  uint64_t bytes = 0;                  // the largest operation's
  std::vector<ExchangeMember> members;  // by communicator rank
};

struct CommMatches {                   // per communicator
  uint32_t name = StringTable::kNone;
  int nranks = 0;
  std::vector<int> ranks;              // global rank by communicator rank (-1: never seen)
  size_t ranks_known = 0;              // entries of ranks that are not -1
  uint64_t matched = 0;                // collectives matched on every rank, in an exchange
  uint64_t incomplete = 0;             // seen on some ranks only, or without usable GPU times
  uint64_t suspect = 0;                // ... of those: suspect GPU times (gpu_time_suspect) on some rank
  uint64_t shifted = 0;                // ... of those: NCCL's work counter was shifted (not host timed)
  uint64_t p2p_pairs = 0;              // Send/Recv pairs matched, in an exchange
  uint64_t host_timed = 0;             // exchanges timed by the ranks' enqueue
};

struct Exchanges {
  std::vector<ClockUnit> units;
  std::vector<size_t> unit_of_rank;    // the first unit of each model rank
  std::vector<Exchange> list;          // complete exchanges, by (comm, func, seq)
  std::map<uint32_t, CommMatches> comms;
  // Per unit, over its usable collectives: (GPU stop, host time of the callback that reported it
  // - the GPU stop): the GPU clock's offset from the host clock plus NCCL's proxy lag.
  std::vector<std::vector<CallbackDelay>> callback_delays;
};

Exchanges build_exchanges(const RunModel& model);

bool symmetric_collective(const std::string& func);

}  // namespace laggard::report
