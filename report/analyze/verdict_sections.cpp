// Findings from NVTX sections' CPU time per step: detect, keep the narrowest sections that
// carry the excess, give each its cause, and join what the GPU analysis already found.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "stats.h"
#include "units.h"
#include "verdict_context.h"

namespace laggard::report {
namespace {

struct Candidate {
  Excess x;
  const Signal* signal = nullptr;
  bool dropped = false;
};

bool overlaps(const Excess& a, const Excess& b) { return a.first <= b.last && b.first <= a.last; }

// The section tree, with the step section as the root of every other top-level section (a
// range started on another thread, such as a data loader's, is top level but part of the step).
class SectionTree {
 public:
  SectionTree(const std::vector<Signal>& signals, std::string step) : step_(std::move(step)) {
    for (const Signal& s : signals) parent_[s.name] = s.parent;
  }
  std::string parent_of(const std::string& name) const {
    auto it = parent_.find(name);
    std::string p = it == parent_.end() ? "" : it->second;
    return p.empty() && name != step_ ? step_ : p;
  }
  int depth(const std::string& name) const {
    int d = 0;
    for (std::string p = parent_of(name); !p.empty() && d < 64; p = parent_of(p)) ++d;
    return d;
  }
  bool is_below(const std::string& name, const std::string& ancestor) const {
    int guard = 0;
    for (std::string p = parent_of(name); !p.empty() && guard < 64; p = parent_of(p), ++guard)
      if (p == ancestor) return true;
    return false;
  }
  std::vector<std::string> children(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& [s, p] : parent_)
      if (s != name && parent_of(s) == name) out.push_back(s);
    return out;
  }

 private:
  std::string step_;
  std::map<std::string, std::string> parent_;
};

std::vector<Candidate> detect_all(const VerdictContext& c) {
  std::vector<double> starts;
  if (!c.steps.per_rank.empty())
    for (int k = 0; k < c.steps.count(); ++k) starts.push_back(double(c.steps.per_rank[0][k].start_ns));
  std::vector<Candidate> out;
  for (const Signal& s : c.sections)
    for (const Excess& x : detect_excess(s, c.step_ns, c.criteria, c.excess, starts))
      out.push_back({x, &s});
  return out;
}

// How much slower a section got on a rank over some steps, relative to its usual time.
class RelativeExcess {
 public:
  explicit RelativeExcess(const std::vector<Signal>& signals) {
    for (const Signal& s : signals) {
      std::vector<double> all;
      for (const auto& row : s.ns)
        for (double v : row)
          if (!std::isnan(v)) all.push_back(v);
      by_name_[s.name] = {excess_matrix(s), median(all)};
    }
  }
  double usual_ns(const std::string& name) const { return by_name_.at(name).second; }
  // Median excess over rows [first, last] divided by the section's usual time; 0 if unknown.
  double of(const std::string& name, size_t r, int first, int last) const {
    const auto& [e, usual] = by_name_.at(name);
    std::vector<double> xs;
    for (int k = first; k <= last && k < static_cast<int>(e.size()); ++k)
      if (!std::isnan(e[k][r])) xs.push_back(e[k][r]);
    return usual > 0 && !xs.empty() ? median(xs) / usual : 0;
  }

 private:
  std::map<std::string, std::pair<std::vector<std::vector<double>>, double>> by_name_;
};

// A section got uniformly slower when each of its sizeable sub-sections (>= 5 % of it) got
// slower by at least half its own factor: then the section is the place to name.
bool uniformly_slower(const Candidate& p, const std::vector<std::string>& kids, const RelativeExcess& rel) {
  const std::string& name = p.signal->name;
  const double usual = rel.usual_ns(name);
  const double factor = usual > 0 ? p.x.median_excess_ns / usual : 0;
  int sizeable = 0;
  for (const std::string& k : kids) {
    if (rel.usual_ns(k) < 0.05 * usual) continue;
    ++sizeable;
    if (rel.of(k, p.x.rank, p.x.first, p.x.last) < 0.5 * factor) return false;
  }
  return sizeable > 0;
}

// A section's finding moves to its sub-sections when their findings explain most of it and the
// slowdown is in some of them; when all of it got slower (or its own time did), the section is
// the narrowest honest place and its sub-sections' findings fold into it.
void keep_narrowest(std::vector<Candidate>& cs, const SectionTree& tree, const RelativeExcess& rel,
                    double explained_share) {
  std::stable_sort(cs.begin(), cs.end(), [&](const Candidate& a, const Candidate& b) {
    return tree.depth(a.signal->name) < tree.depth(b.signal->name);
  });
  for (Candidate& p : cs) {
    if (p.dropped) continue;
    std::map<std::string, double> found;
    for (const Candidate& k : cs)
      if (!k.dropped && k.x.rank == p.x.rank && overlaps(k.x, p.x) &&
          tree.parent_of(k.signal->name) == p.signal->name)
        found[k.signal->name] = std::max(found[k.signal->name], k.x.median_excess_ns);
    double explained = 0;
    for (auto& [name, v] : found) explained += v;
    if (!found.empty() && explained >= explained_share * p.x.median_excess_ns &&
        !uniformly_slower(p, tree.children(p.signal->name), rel)) {
      p.dropped = true;
      continue;
    }
    for (Candidate& k : cs)
      if (&k != &p && k.x.rank == p.x.rank && overlaps(k.x, p.x) && tree.is_below(k.signal->name, p.signal->name))
        k.dropped = true;
  }
}

int step_number(const VerdictContext& c, int row) {
  return c.steps.per_rank.empty() ? row : c.steps.per_rank[0][row].index;
}

// Extra GPU kernel time launched from the section on rank r over the rows, when known.
double section_kernel_excess(const JitterReport& j, size_t r, const std::string& section, const Excess& x) {
  std::vector<double> xs;
  for (int k = x.first; k <= x.last && k < static_cast<int>(j.matrix.size()); ++k) {
    const RankStepJitter& cell = j.matrix[k][r];
    if (!cell.present) continue;
    auto it = cell.duration_excess_by_section.find(section);
    xs.push_back(it == cell.duration_excess_by_section.end() ? 0 : it->second);
  }
  return median(xs);
}

std::string section_cause(const VerdictContext& c, const Candidate& cand, Finding& f) {
  if (!c.breakdown.available) {
    f.cause = Cause::unknown;
    return "CPU time only: no GPU records to tell GPU work from host work";
  }
  const double compute =
      c.jitter.available ? section_kernel_excess(c.jitter, cand.x.rank, cand.signal->name, cand.x) : 0;
  const double impact = cand.x.median_excess_ns;
  const double share = impact > 0 ? std::clamp(compute / impact, 0.0, 1.0) : 0;
  f.cause = share >= c.options.cause_share ? Cause::gpu_compute : Cause::host;
  f.cause_share = f.cause == Cause::gpu_compute ? share : 1 - share;
  return f.cause == Cause::gpu_compute
             ? fmt::format("{:.0f} % of it is GPU compute launched from this section", 100 * share)
             : fmt::format("its GPU kernels explain only {:.0f} % of it: host/CPU time", 100 * share);
}

Finding section_finding(const VerdictContext& c, const Candidate& cand) {
  const RankData& rd = c.model.ranks[cand.x.rank];
  Finding f;
  f.rank = rd.rank;
  f.host = rd.host;
  f.kind = cand.x.whole_run ? "persistent" : "transient";
  f.section = cand.signal->name;
  if (!cand.x.whole_run) {
    f.first_step = step_number(c, cand.x.first);
    f.last_step = step_number(c, cand.x.last);
  }
  f.impact_ns = cand.x.median_excess_ns;
  f.steps_affected = cand.x.last - cand.x.first + 1;
  add_excess_evidence(f, cand.x, c.step_ns);
  const std::string cause = section_cause(c, cand, f);
  const std::string when = cand.x.whole_run ? std::string("per step")
                                            : fmt::format("per step in steps {}-{} only", f.first_step, f.last_step);
  f.summary = fmt::format("{} spends {:.3f} ms more than the median rank in {} {} (CPU time); {}; {}",
                          rank_name(f.rank, f.host), ms(f.impact_ns), f.section, when,
                          excess_sentence(cand.x, c.step_ns, c.steps.count()), cause);
  return f;
}

// An overlapping finding on the same rank from its lateness at the collective (the GPU
// analysis): the section's CPU time is evidence for it, not a second finding.
Finding* joined_finding(FindingSet& out, size_t from_steps, const Finding& f) {
  for (size_t i = 0; i < from_steps && i < out.findings.size(); ++i) {
    Finding& g = out.findings[i];
    if (g.rank != f.rank) continue;
    const bool g_whole = g.first_step < 0, f_whole = f.first_step < 0;
    if (g_whole || f_whole || (g.first_step <= f.last_step && f.first_step <= g.last_step)) return &g;
  }
  return nullptr;
}

}  // namespace

void add_section_findings(const VerdictContext& c, FindingSet& out) {
  if (c.sections.empty()) return;
  const size_t from_steps = out.findings.size();
  std::vector<Candidate> cs = detect_all(c);
  keep_narrowest(cs, SectionTree(c.sections, c.steps.section), RelativeExcess(c.sections),
                 c.options.explained_by_children);
  for (const Candidate& cand : cs) {
    if (cand.dropped) continue;
    Finding f = section_finding(c, cand);
    if (Finding* g = joined_finding(out, from_steps, f)) {
      g->evidence["nvtx_excess_ms_" + f.section] = ms(f.impact_ns);
      g->evidence["nvtx_z_" + f.section] = f.evidence["z"];
      continue;
    }
    out.add(std::move(f), cand.x.rank);
  }
}

}  // namespace laggard::report
