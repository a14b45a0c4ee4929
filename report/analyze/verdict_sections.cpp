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
  // Sub-sections with findings of their own that outlast this one: their excess over this
  // finding's steps (median, ns), taken out of this finding's (issue 30).
  std::map<std::string, double> explained_by;
};

bool overlaps(const Excess& a, const Excess& b) { return a.first <= b.last && b.first <= a.last; }
bool within(const Excess& inner, const Excess& outer) { return outer.first <= inner.first && inner.last <= outer.last; }

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

std::vector<Candidate> detect_all(const VerdictContext& c, const std::vector<Signal>& signals) {
  std::vector<double> starts;
  if (!c.steps.per_rank.empty())
    for (int k = 0; k < c.steps.count(); ++k) starts.push_back(double(c.steps.per_rank[0][k].start_ns));
  std::vector<Candidate> out;
  for (const Signal& s : signals) {
    if (is_waiting_section(s.name)) continue;  // a host-timed collective: waiting (issue 25)
    for (const Excess& x : detect_excess(s, c.signals.step_ns, c.criteria, c.excess, starts))
      out.push_back({x, &s});
  }
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
  // The excess of section `name` on rank r in row k (NaN: not measured).
  double at(const std::string& name, size_t r, int k) const {
    const auto& e = by_name_.at(name).first;
    return k < static_cast<int>(e.size()) ? e[k][r] : std::nan("");
  }
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

// The sections among `below` that no other of them lies under: their excesses add up without
// counting a nested section twice.
std::vector<std::string> topmost(const std::vector<std::string>& below, const SectionTree& tree) {
  std::vector<std::string> out;
  for (const std::string& d : below) {
    bool nested = false;
    for (const std::string& e : below) nested = nested || (e != d && tree.is_below(d, e));
    if (!nested && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

// A kept finding that shares its steps with longer findings below it (issue 30: a hiccup of the
// step in steps 0-6 above a backward slow in all 40) keeps only its own part: its per-step
// excess less theirs. It stays a finding when that part is still clear and material.
bool keep_own_part(Candidate& p, const std::vector<std::string>& longer, const RelativeExcess& rel,
                   const VerdictContext& c) {
  const std::string& name = p.signal->name;
  std::vector<double> own;
  std::map<std::string, std::vector<double>> theirs;
  for (int k = p.x.first; k <= p.x.last; ++k) {
    double e = rel.at(name, p.x.rank, k);
    if (std::isnan(e)) continue;
    for (const std::string& d : longer) {
      const double ed = rel.at(d, p.x.rank, k);
      if (std::isnan(ed)) continue;
      theirs[d].push_back(ed);
      e -= ed;
    }
    own.push_back(e);
  }
  if (own.empty()) return true;
  for (auto& [d, xs] : theirs) p.explained_by[d] = median(xs);
  const double before = p.x.median_excess_ns, after = median(own);
  double sum = 0;
  for (double e : own) sum += e;
  if (before <= 0 || after < c.criteria.min_excess_ns) return false;  // min_excess_ns holds the cost share too
  p.x.z *= after / before;
  if (p.x.z < c.criteria.z_crit) return false;
  p.x.median_excess_ns = after;
  p.x.mean_excess_ns = sum / double(own.size());
  p.x.cost_share = c.signals.step_ns > 0 ? after / c.signals.step_ns : 0;
  return true;
}

// A section's finding moves to its sub-sections when their findings explain most of it and the
// slowdown is in some of them; when all of it got slower (or its own time did), the section is
// the narrowest honest place and its sub-sections' findings within its steps fold into it. A
// sub-section's finding that outlasts it is a slowdown of its own and stays (issue 30).
void keep_narrowest(std::vector<Candidate>& cs, const SectionTree& tree, const RelativeExcess& rel,
                    const VerdictContext& c) {
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
    if (!found.empty() && explained >= c.options.explained_by_children * p.x.median_excess_ns &&
        !uniformly_slower(p, tree.children(p.signal->name), rel)) {
      p.dropped = true;
      continue;
    }
    std::vector<Candidate*> inside;
    std::vector<std::string> longer;
    for (Candidate& k : cs) {
      if (&k == &p || k.dropped || k.x.rank != p.x.rank || !overlaps(k.x, p.x) ||
          !tree.is_below(k.signal->name, p.signal->name))
        continue;
      if (within(k.x, p.x)) inside.push_back(&k);
      else longer.push_back(k.signal->name);
    }
    if (!longer.empty() && !keep_own_part(p, topmost(longer, tree), rel, c)) {
      p.dropped = true;  // nothing of its own: the longer findings below carry it
      continue;
    }
    for (Candidate* k : inside) k->dropped = true;
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
  add_excess_evidence(f, cand.x, c.signals.step_ns);
  std::string beyond;
  for (const auto& [name, ns] : cand.explained_by) {
    f.evidence["explained_by_" + name + "_ms"] = ms(ns);
    beyond += fmt::format("{}{} ({:.3f} ms, a finding of its own)", beyond.empty() ? "" : ", ", name, ms(ns));
  }
  const std::string cause = section_cause(c, cand, f);
  const std::string when = cand.x.whole_run ? std::string("per step")
                                            : fmt::format("per step in steps {}-{} only", f.first_step, f.last_step);
  const std::string own = beyond.empty() ? "" : fmt::format(", beyond what {} explain{}", beyond,
                                                               cand.explained_by.size() == 1 ? "s" : "");
  f.summary = fmt::format("{} spends {:.3f} ms more than the median rank in {} {}{} (CPU time); {}; {}",
                          rank_name(f.rank, f.host), ms(f.impact_ns), f.section, when, own,
                          excess_sentence(cand.x, c.signals.step_ns, c.steps.count()), cause);
  return f;
}

// The candidates of one set of signals that keep_narrowest keeps.
std::vector<Candidate> kept_candidates(const VerdictContext& c, const std::vector<Signal>& signals) {
  std::vector<Candidate> cs = detect_all(c, signals);
  // Most runs have no candidate at all, and the excess matrices keep_narrowest reads cost as
  // much as the detection (0.15 s at 30,000 ranks of summaries, growing faster than the ranks).
  if (cs.empty()) return cs;
  keep_narrowest(cs, SectionTree(signals, c.steps.section), RelativeExcess(signals), c);
  std::erase_if(cs, [](const Candidate& x) { return x.dropped; });
  // Issue 25: time the rank spent waiting at a collective for a later rank, which is named there.
  std::erase_if(cs, [&](const Candidate& x) {
    return waited_in_section(c, x.x.rank, x.signal->name, x.x.first, x.x.last) >=
           c.options.cause_share * x.x.median_excess_ns;
  });
  return cs;
}

double wait_slope_of(const VerdictContext& c, const std::string& section) {
  auto it = c.signals.wait_slope.find(section);
  return it == c.signals.wait_slope.end() ? 0 : it->second;
}

// A finding that stands with the rank's extra CPU wait taken out (issue 30): the part of it that
// the section follows is not the rank's.
Finding less_wait_finding(const VerdictContext& c, const Candidate& cand) {
  Finding f = section_finding(c, cand);
  const double b = wait_slope_of(c, f.section);
  const double taken = b * extra_cpu_wait(c, cand.x.rank, cand.x.first, cand.x.last) / (cand.x.last - cand.x.first + 1);
  f.evidence["cpu_wait_slope"] = b;
  f.evidence["cpu_wait_taken_out_ms"] = ms(taken);
  if (b > 0)
    f.summary += fmt::format("; measured with the rank's extra CPU wait taken out as far as {} follows it ({:.2f} of "
                             "each ms; {:.3f} ms a step here)",
                             f.section, b, ms(taken));
  return f;
}

// A finding only the raw times show (issue 30). The slope is a section's average share of its
// rank's extra wait; in one run of steps the wait may all have fallen in it. So when the rank's
// whole extra wait in those steps is at least cause_share of what it lost, it was that wait;
// otherwise (it waited no more than the others) it stands as found: it only fell below the line
// with the noise of the taking out.
Finding raw_only_finding(const VerdictContext& c, const Candidate& cand) {
  Finding f = section_finding(c, cand);
  const double b = wait_slope_of(c, f.section);
  const double steps = cand.x.last - cand.x.first + 1;
  const double loss = cand.x.mean_excess_ns * steps;
  const double extra = extra_cpu_wait(c, cand.x.rank, cand.x.first, cand.x.last);
  f.evidence["cpu_wait_slope"] = b;
  if (loss > 0 && extra < c.options.cause_share * loss) return f;
  f.cause = Cause::cpu_contention;
  f.cause_share = loss > 0 ? std::clamp(extra / loss, 0.0, 1.0) : 1.0;
  f.summary += fmt::format("; gone once the rank's extra CPU wait is taken out as far as {} follows it ({:.2f} of "
                           "each ms), and its threads waited {:.1f} ms more for a CPU than the median rank's in those "
                           "steps, against {:.1f} ms lost: CPU contention, its host was busy with other work",
                           f.section, b, ms(extra), ms(loss));
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
  if (c.signals.sections.empty()) return;
  const size_t from_steps = out.findings.size();
  std::vector<Candidate> raw = kept_candidates(c, c.signals.sections);
  std::vector<std::pair<Finding, size_t>> found;
  if (c.signals.sections_less_wait.empty()) {
    for (const Candidate& cand : raw) found.emplace_back(section_finding(c, cand), cand.x.rank);
  } else {
    // Issue 30: judged with each rank's extra CPU wait taken out; what only the raw times show
    // was that wait.
    std::vector<Candidate> less = kept_candidates(c, c.signals.sections_less_wait);
    for (const Candidate& cand : less) found.emplace_back(less_wait_finding(c, cand), cand.x.rank);
    for (const Candidate& cand : raw) {
      const bool kept = std::any_of(less.begin(), less.end(), [&](const Candidate& l) {
        return l.x.rank == cand.x.rank && l.signal->name == cand.signal->name && overlaps(l.x, cand.x);
      });
      if (!kept) found.emplace_back(raw_only_finding(c, cand), cand.x.rank);
    }
  }
  for (auto& [f, r] : found) {
    if (Finding* g = joined_finding(out, from_steps, f)) {
      g->evidence["nvtx_excess_ms_" + f.section] = ms(f.impact_ns);
      g->evidence["nvtx_z_" + f.section] = f.evidence["z"];
      continue;
    }
    out.add(std::move(f), r);
  }
}

}  // namespace laggard::report
