// Inside the verdict (not an API): what every step of `decide` reads, and the findings so far.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "excess.h"
#include "verdict.h"

namespace laggard::report {

// How a finding names its rank: "rank 3 (host node1, GPU 2)". A part that is unknown is left out
// (an imported trace has no host name: "rank 3 (GPU 2)", "rank 3"), never printed empty.
inline std::string rank_name(int rank, const std::string& host, int device = -1) {
  std::string where = host.empty() ? "" : "host " + host;
  if (device >= 0) where += (where.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(device);
  return "rank " + std::to_string(rank) + (where.empty() ? "" : " (" + where + ")");
}

struct VerdictContext {
  const RunModel& model;
  const StepSet& steps;
  const ScoreReport& scores;
  const JitterReport& jitter;
  const BreakdownReport& breakdown;
  const VerdictOptions& options;
  const GpuScoreReport* gpu;
  const CommReport* comm;
  StepSignals signals;
  ExcessCriteria criteria;          // for every per-step signal of this run
  ExcessOptions excess;             // options.excess, with the report window filled in
  std::unordered_map<int, size_t> index_of_rank;  // rank number -> index in model.ranks
  // Index in model.ranks of a rank number; model.ranks.size() when the run has no such rank.
  size_t rank_index(int rank) const {
    auto it = index_of_rank.find(rank);
    return it == index_of_rank.end() ? model.ranks.size() : it->second;
  }
};

struct FindingSet {
  std::vector<Finding> findings;
  std::vector<bool> has;  // per rank index: some finding names it
  std::vector<int> rank_of;  // per rank index: its rank number, for of_rank
  void add(Finding f, size_t r) {
    findings.push_back(std::move(f));
    if (r < has.size()) {
      has[r] = true;
      rank_of[r] = findings.back().rank;
    }
  }
  // The findings naming rank index r (none unless has[r]): a short scan, only for ranks that have one.
  std::vector<Finding*> of_rank(size_t r) {
    std::vector<Finding*> out;
    if (r >= has.size() || !has[r]) return out;
    for (Finding& f : findings)
      if (f.rank == rank_of[r]) out.push_back(&f);
    return out;
  }
};

// The confidence and loss of a per-step finding, as evidence and as a sentence.
void add_excess_evidence(Finding& f, const Excess& x, double step_ns);
std::string excess_sentence(const Excess& x, double step_ns, int total_steps);

// Issue 25 (verdict_waiting.cpp): a host-timed collective's section ("torch:all_reduce@default")
// is waiting, never a finding; and the median, over step rows [first_row, last_row], of the time
// rank index r spent inside `section` waiting at host-timed collectives for the last arriver.
bool is_waiting_section(const std::string& section);
double waited_in_section(const VerdictContext& c, size_t r, const std::string& section, int first_row, int last_row);

// NVTX sections' per-step CPU time (verdict_sections.cpp). A finding on a rank that already
// has an overlapping one (from its lateness at the collective) joins it as evidence.
void add_section_findings(const VerdictContext& c, FindingSet& out);

// Issue 30 (verdict_contention.cpp): the CPU-wait matrix and the sections less the wait they
// follow (fills signals.cpu_wait, sections_less_wait and wait_slope from signals.sections; nothing
// without measurements).
void take_out_cpu_wait(const RunModel& model, const StepSet& steps, StepSignals& signals);
// The rank's extra CPU wait (its own less the median rank's) summed over step rows [first, last].
double extra_cpu_wait(const VerdictContext& c, size_t r, int first, int last);

// Findings whose rank's threads waited for a CPU for at least `cause_share` of what they lost,
// more than the median rank over the same steps, get the cause cpu_contention; the waits are
// evidence either way. Section findings already judged with the wait taken out keep their cause.
void name_cpu_contention(const VerdictContext& c, FindingSet& out);

}  // namespace laggard::report
