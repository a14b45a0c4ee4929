// Ranks on different hosts read different clocks. A collective ends at nearly the same moment on
// all its ranks (the last data arrives everywhere together), so each rank's clock offset is
// estimated from the collectives' end times; ranks of one host share the host's clock, whose
// offset is the median of its ranks' estimates. Pure function of matched end times.
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

struct ClockOffsets {
  std::vector<double> rank_estimate_ns;  // per rank: its clock minus the reference, as its own ends say
  std::vector<double> applied_ns;        // per rank: its host's offset (what is subtracted)
  struct Host {
    std::string host;
    double offset_ns = 0;
    std::vector<size_t> ranks;
    double spread_ns = 0;                // max - min of its ranks' estimates: how consistent they are
  };
  std::vector<Host> hosts;
  size_t reference_rank = 0;             // index of the rank whose host defines zero
  double max_abs_offset_ns = 0;          // largest applied correction
  double residual_ns = 0;                // median |end - collective's end| after correction
  size_t samples = 0;
};

// hosts[r]: host of rank index r. Ranks without samples get offset 0 (their host's, if any).
ClockOffsets estimate_clock_offsets(const std::vector<ClockSample>& samples, const std::vector<std::string>& hosts,
                                    size_t ngroups);

}  // namespace laggard::report
