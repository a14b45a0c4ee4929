// Each GPU has its own clock: NCCL's GPU timestamps are %globaltimer, set from the host clock
// when the device attaches and never adjusted afterwards, so every GPU (every rank) reads its
// own offset, and drifts at its own rate (ppm). A symmetric collective (AllReduce, AllGather,
// ReduceScatter) ends at nearly the same moment on all its ranks (the last data arrives
// everywhere together), so per rank
//     end(rank, collective) = T(collective) + offset(rank) + drift(rank) x (T(collective) - t_ref)
// is fitted: T by the median over the collective's ranks, offset and drift by a trimmed least-
// squares line per rank, alternating. The first rank with samples is the reference (0, 0).
// What is left (the residual) says how well one end time per collective explains the ends.
// Late arrival does not move the end, so the fit does not absorb the straggling it must find.
// Pure function of matched end times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laggard::report {

struct ClockSample {  // one rank's end time of one matched collective
  size_t group;       // index of the collective
  size_t rank;        // index of the rank (0..nranks-1)
  int64_t end_ns;
};

struct ClockOptions {
  // A drift is fitted only over at least this span and this many samples (else offset only).
  int64_t min_drift_span_ns = 2'000'000'000;
  size_t min_drift_samples = 20;
  int iterations = 10;
};

struct ClockOffsets {
  int64_t t_ref_ns = 0;                  // time (reference clock) at which offset_ns applies
  std::vector<double> offset_ns;         // per rank: its clock minus the reference's at t_ref
  std::vector<double> drift_ppm;         // per rank: how fast its clock runs ahead of the reference's
  std::vector<double> rank_residual_ns;  // per rank: median |end - fitted end| over its samples
  std::vector<size_t> rank_samples;      // per rank
  struct Host {                          // for the reader: how consistent the GPUs of one host are
    std::string host;
    double offset_ns = 0;                // median of its ranks' offsets
    std::vector<size_t> ranks;
    double spread_ns = 0;                // max - min of its ranks' offsets
  };
  std::vector<Host> hosts;
  size_t reference_rank = 0;             // index of the rank whose clock defines zero
  double max_abs_offset_ns = 0;          // largest correction at t_ref
  double max_abs_drift_ppm = 0;
  double residual_ns = 0;                // median |end - collective's end| after correction, all ranks
  size_t samples = 0;

  // What to subtract from rank r's GPU time t (ns, its own clock) to put it on the reference clock.
  double correction(size_t r, int64_t t) const {
    return r < offset_ns.size() ? offset_ns[r] + drift_ppm[r] * 1e-6 * double(t - t_ref_ns) : 0;
  }
};

// hosts[r]: host of rank index r. Ranks without samples get offset 0 and drift 0.
ClockOffsets estimate_clock_offsets(const std::vector<ClockSample>& samples, const std::vector<std::string>& hosts,
                                    size_t ngroups, const ClockOptions& options = {});

// The fit against the host clock (issue 27). The fit cannot tell a GPU whose collectives end late
// every time (a slow GPU, or one that is late all along) from a GPU clock that reads ahead: both
// move that GPU's ends by the same amount in every collective, and the fit takes it for an
// offset, hiding the GPU and blaming the others. NCCL's proxy calls back with each GPU stop
// after the GPU wrote it, on the host clock, which GPUs of one host share: the floor of
// (callback host time - GPU stop) is that GPU's offset from the host clock, plus a small lag.
struct CallbackDelay {
  int64_t gpu_ns;    // the GPU stop (its own clock)
  int64_t delay_ns;  // host time of the callback that reported it - gpu_ns
};
struct CallbackCheckOptions {
  double tolerance_ns = 20'000;  // disagreement tolerated (at least; more where callbacks are noisy)
  size_t min_samples = 24;       // per GPU
  int buckets = 8;               // time slices compared (drift: the floors are compared slice by slice)
};
// Per host with two or more GPUs that have callbacks: each GPU's offset from the fit minus the one
// from the callbacks, against the host's median, slice by slice. A GPU whose median difference is
// beyond the tolerance gets its offset corrected by it (its drift stays). delays[r]: rank index
// r's. Returns the ranks corrected.
std::vector<size_t> check_with_callbacks(ClockOffsets& fit, const std::vector<std::vector<CallbackDelay>>& delays,
                                         const std::vector<std::string>& hosts, const CallbackCheckOptions& o = {});

}  // namespace laggard::report
