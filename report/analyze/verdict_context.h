// Inside the verdict (not an API): what every step of `decide` reads, and the findings so far.
#pragma once

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
  double step_ns = 0;               // median step time over ranks and steps
  std::vector<Signal> sections;     // NVTX CPU time per step (section_steps.h)
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

// NVTX sections' per-step CPU time (verdict_sections.cpp). A finding on a rank that already
// has an overlapping one (from its lateness at the collective) joins it as evidence.
void add_section_findings(const VerdictContext& c, FindingSet& out);

}  // namespace laggard::report
