#include "comm_analysis.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "clock_offsets.h"
#include "nccl_exchanges.h"
#include "parallel.h"
#include "stats.h"

namespace laggard::report {
namespace {

struct Outcome {  // what the analysis found for one exchange
  int64_t last_arrival = 0;     // on the reference clock
  double total_wait = 0;
  double transfer_ns = 0, algbw = 0, busbw = 0, size = 0;
  std::vector<int> last_ranks;  // global ranks that arrived last by themselves
  std::vector<std::pair<size_t, double>> blamed;  // rank index, share of the waiting (sums to 1)
  std::vector<int64_t> start, end;  // by member, on the reference clock
  std::vector<double> wait;         // by member
  // What does not depend on earlier exchanges, found for all exchanges at once (arrivals()).
  int64_t first_arrival = 0, latest_end = 0;
  std::vector<char> is_last;      // by member: arrived within the floor of the last arrival
  int nlast = 0;                  // members is_last
  double others_wait = 0;         // waited by the members not last
  double latest_waiter = 0;       // the latest arrival of a member not last (or the first arrival)
  std::vector<size_t> units;      // the members' clock units, sorted; handed to member_set
  // member_set's result, held here for Previous::units (one per exchange at most: consecutive
  // exchanges with the same members share it).
  std::shared_ptr<const std::vector<size_t>> unit_set;
};

// What NCCL did with the plugin on this rank, as its files tell.
std::string plugin_status(const RankData& r) {
  int table = 0;
  std::string kernel_events;
  bool any = false;
  for (const CaptureWindow& w : r.windows) {
    table = std::max(table, w.nccl_table);
    if (!w.nccl_kernel_events.empty()) kernel_events = w.nccl_kernel_events;
    any |= !w.collectives.empty() || !w.p2p.empty();
  }
  if (table) return fmt::format("v{} table, kernel events {}", table, kernel_events.empty() ? "on" : kernel_events);
  if (any) return "initialized by NCCL";  // version 3 files do not say which table
  if (r.nccl_status == "on") return "offered; NCCL never initialized it";
  return r.nccl_status.empty() ? "unknown" : r.nccl_status;
}

// Per communicator: sequence numbers (per function) missing between the first and the last one
// any rank saw. Each rank sees the same numbers: kept once each as they come (at 100,000 ranks,
// 5 M numbers sorted with their duplicates took 0.27 s).
std::map<uint32_t, uint64_t> seq_gaps(const RunModel& m) {
  struct MixedHash {  // the numbers come from files
    size_t operator()(uint64_t h) const { return mix_bits(h); }
  };
  struct Seen {
    std::unordered_set<uint64_t, MixedHash> seqs;
    uint64_t lo = UINT64_MAX, hi = 0;
  };
  std::map<std::pair<uint32_t, uint32_t>, Seen> seen;  // (comm, func)
  std::pair<uint32_t, uint32_t> last_key{};
  Seen* last = nullptr;  // runs of one communicator and function need no lookup
  for (const RankData& r : m.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const Collective& c : w.collectives) {
        if (c.p2p) continue;
        if (!last || last_key != std::pair{c.comm, c.func}) {
          last_key = {c.comm, c.func};
          last = &seen[last_key];
        }
        last->seqs.insert(c.seq);
        last->lo = std::min(last->lo, c.seq);
        last->hi = std::max(last->hi, c.seq);
      }
  std::map<uint32_t, uint64_t> gaps;
  for (const auto& [key, s] : seen) gaps[key.first] += (s.hi - s.lo + 1) - s.seqs.size();
  return gaps;
}

std::string comm_label(const RunModel& m, const CommSummary& c) {
  return "comm " + (c.name != StringTable::kNone ? m.strings.at(c.name) : m.strings.at(c.comm));
}

}  // namespace

double bus_factor(const std::string& func, int n) {
  if (n < 1) return 1;
  if (func == "AllReduce") return 2.0 * (n - 1) / n;
  if (func == "AllGather" || func == "ReduceScatter") return double(n - 1) / n;
  return 1;
}

double algbw_bytes(const std::string& func, uint64_t bytes, int n) {
  if (func == "AllGather" || func == "ReduceScatter") return double(bytes) * n;
  return double(bytes);
}

namespace {

// What the steps of analyze_collectives pass on to each other.
struct CommWork {
  const RunModel& m;
  const ScoreReport& scores;
  const CommOptions& opt;
  CommReport& rep;
  std::map<uint32_t, size_t> comm_at;  // comm id -> index in rep.comms
  Exchanges x;                         // matched on every rank (nccl_exchanges.h)
  ClockOffsets clock;                  // per clock unit (GPU)
  std::vector<Outcome> outcomes;       // per exchange
  // [comm index][comm rank]; rank -1: the rank took part in none of its exchanges.
  std::vector<std::vector<CommSummary::PerRank>> per_comm_rank;
  // [comm index]: global rank -> its first communicator rank (built when first credited).
  std::vector<std::unordered_map<int, size_t>> comm_rank_of;
  // A member's time on the reference clock (host-timed exchanges are on the host clock already).
  int64_t aligned(const Exchange& ex, const ExchangeMember& mb, int64_t t) const {
    return ex.host_timed ? t : t - std::llround(clock.correction(mb.unit, t));
  }
};

// Every rank's operations counted (p2p ones too); false when there are none.
bool collect(CommWork& w) {
  const size_t R = w.m.ranks.size();
  w.rep.ranks.resize(R);
  struct Counted {
    decltype(w.rep.ops) ops{};
    decltype(w.rep.p2p) p2p{};
  };
  std::vector<Counted> counted(R);  // summed in rank order below
  parallel_for(R, [&](size_t ri) {  // ranks are independent: on every core
    CommRankStats& s = w.rep.ranks[ri];
    Counted& n = counted[ri];
    s.rank = w.m.ranks[ri].rank;
    s.host = w.m.ranks[ri].host;
    s.gpu_shift_ns = w.m.ranks[ri].nccl_gpu_shift_ns;
    s.nccl_plugin = plugin_status(w.m.ranks[ri]);
    for (const CaptureWindow& cw : w.m.ranks[ri].windows) {
      for (const CaptureWindow::P2pCounts& p : cw.p2p) {
        n.p2p += p.sends + p.recvs;
        s.p2p_ops += p.sends + p.recvs;
        s.p2p_bytes += p.send_bytes + p.recv_bytes;
      }
      for (const Collective& c : cw.collectives) {
        s.suspect += c.gpu_time_suspect != nullptr;
        ++n.ops;
        if (!c.p2p) continue;
        ++n.p2p;
        ++s.p2p_ops;
        s.p2p_bytes += c.bytes;
        if (c.gpu_start_ns && c.gpu_end_ns > c.gpu_start_ns) s.p2p_gpu_ns += double(c.gpu_end_ns - c.gpu_start_ns);
      }
    }
  });
  for (const Counted& n : counted) {
    w.rep.ops += n.ops;
    w.rep.p2p += n.p2p;
  }
  return w.rep.ops > 0;
}

// The exchanges, and per communicator what matched and what did not.
void summarize_matches(CommWork& w) {
  w.x = build_exchanges(w.m);
  for (const auto& [comm, cm] : w.x.comms) {
    w.comm_at[comm] = w.rep.comms.size();
    CommSummary s;
    s.comm = comm;
    s.name = cm.name;
    s.nranks = cm.nranks;
    s.ranks = cm.ranks;
    s.last_share_threshold = cm.nranks > 0 ? (1.0 + 1.0 / cm.nranks) / 2 : 1;
    s.collectives = cm.matched;
    s.incomplete = cm.incomplete;
    s.suspect = cm.suspect;
    s.shifted = cm.shifted;
    s.p2p_pairs = cm.p2p_pairs;
    s.host_timed = cm.host_timed;
    w.rep.matched += cm.matched;
    w.rep.incomplete += cm.incomplete;
    w.rep.suspect += cm.suspect;
    w.rep.shifted += cm.shifted;
    w.rep.p2p_pairs += cm.p2p_pairs;
    w.rep.host_timed += cm.host_timed;
    w.rep.comms.push_back(std::move(s));
  }
  w.rep.arrivals = w.x.list.size();
}

// Align clocks: symmetric collectives end together on all ranks (rooted ones and p2p pairs only
// roughly: used when there is nothing else). One clock per GPU; then checked against the host
// callbacks of GPUs that share a host.
void align_clocks(CommWork& w) {
  const RunModel& m = w.m;
  CommReport& rep = w.rep;
  bool any_symmetric = false;
  for (const Exchange& ex : w.x.list) any_symmetric |= ex.symmetric && !ex.host_timed;
  auto fitted = [&](const Exchange& ex) { return !ex.host_timed && (!any_symmetric || ex.symmetric); };
  size_t nsamples = 0;
  for (const Exchange& ex : w.x.list) nsamples += fitted(ex) ? ex.members.size() : 0;
  std::vector<ClockSample> samples;
  samples.reserve(nsamples);  // sized once: 5 M samples at 100,000 ranks
  for (size_t ei = 0; ei < w.x.list.size(); ++ei) {
    const Exchange& ex = w.x.list[ei];
    if (!fitted(ex)) continue;
    for (const ExchangeMember& mb : ex.members) samples.push_back({ei, mb.unit, mb.end});
  }
  std::vector<std::string> unit_hosts;
  for (const ClockUnit& u : w.x.units) unit_hosts.push_back(m.ranks[u.rank].host);
  w.clock = estimate_clock_offsets(samples, unit_hosts, w.x.list.size());
  const std::vector<size_t> corrected = check_with_callbacks(w.clock, w.x.callback_delays, unit_hosts);
  const ClockOffsets& co = w.clock;
  rep.clock.corrected = !samples.empty();
  rep.clock.reference_rank = samples.empty() ? -1 : m.ranks[w.x.units[co.reference_rank].rank].rank;
  rep.clock.reference_time_ns = co.t_ref_ns;
  rep.clock.max_abs_offset_ns = co.max_abs_offset_ns;
  rep.clock.max_abs_drift_ppm = co.max_abs_drift_ppm;
  rep.clock.residual_ns = co.residual_ns;
  rep.clock.samples = co.samples;
  for (const auto& h : co.hosts) {
    CommReport::Clock::Host out{h.host, h.offset_ns, h.spread_ns, {}};
    for (size_t u : h.ranks) out.ranks.push_back(m.ranks[w.x.units[u].rank].rank);
    out.ranks.erase(std::unique(out.ranks.begin(), out.ranks.end()), out.ranks.end());
    rep.clock.hosts.push_back(std::move(out));
  }
  for (size_t u : corrected) rep.clock.callback_corrected.push_back(m.ranks[w.x.units[u].rank].rank);
  rep.clock.callback_corrected.erase(std::unique(rep.clock.callback_corrected.begin(), rep.clock.callback_corrected.end()),
                                     rep.clock.callback_corrected.end());
  for (size_t u = 0; u < w.x.units.size(); ++u) {
    CommRankStats& r = rep.ranks[w.x.units[u].rank];
    const bool first = w.x.unit_of_rank[w.x.units[u].rank] == u;
    if (first) {
      r.clock_offset_ns = co.offset_ns[u];
      r.clock_drift_ppm = co.drift_ppm[u];
      r.clock_residual_ns = co.rank_residual_ns[u];
      r.clock_samples = co.rank_samples[u];
    }
    if (std::binary_search(corrected.begin(), corrected.end(), u)) r.clock_source = "host callbacks";
    if (w.x.units[u].device >= 0)
      r.gpu_clocks.push_back({w.x.units[u].device, co.offset_ns[u], co.drift_ppm[u], co.rank_samples[u]});
  }
  for (CommRankStats& r : rep.ranks)
    if (r.gpu_clocks.size() < 2) r.gpu_clocks.clear();  // one GPU: the rank's own fields say it all
}

// The GPU-timed exchange each GPU was in last: what it waited there, for whom, and who else was
// there (they ended with it: its wait delayed it against the others only).
struct Previous {
  bool valid = false;
  int64_t end = 0;
  double wait = 0;
  // Rank index, share: that exchange's Outcome::blamed, shared by all its members (a copy each
  // was n x blamed per exchange: the blame chain grows with the ranks, 10,000 ranks spent most
  // of the stage copying it). Outcomes do not move while exchanges are scored.
  const std::vector<std::pair<size_t, double>>* waited_for = nullptr;
  // Members, sorted; shared by every member of that exchange (one copy each was n^2 at 10,000
  // ranks), and by consecutive exchanges with the same members. Held by the exchange's Outcome
  // (a shared_ptr here cost two atomic operations per member and exchange).
  const std::vector<size_t>* units = nullptr;
};

// The exchange's members as a sorted set (`units`, sorted by arrivals()), the previous exchange's
// set when they are the same (the communicator's previous exchange), so that "was it there" is
// one pointer compare.
std::shared_ptr<const std::vector<size_t>> member_set(std::vector<size_t>&& units,
                                                      std::shared_ptr<const std::vector<size_t>>& last) {
  if (!last || *last != units) last = std::make_shared<const std::vector<size_t>>(std::move(units));
  std::vector<size_t>().swap(units);
  return last;
}

// The rank's first communicator rank in ci gets the blame too (per_rank is never shorter than
// cs.ranks: both are the communicator's size). One lookup instead of a scan of the communicator.
void credit(CommWork& w, size_t ci, size_t ri, double ns) {
  w.rep.ranks[ri].blame_ns += ns;
  const CommSummary& cs = w.rep.comms[ci];
  auto& per_rank = w.per_comm_rank[ci];
  auto& index = w.comm_rank_of[ci];
  if (index.empty() && !cs.ranks.empty()) {
    index.reserve(cs.ranks.size());
    for (size_t cr = 0; cr < cs.ranks.size(); ++cr) index.emplace(cs.ranks[cr], cr);  // the first stays
  }
  auto it = index.find(w.m.ranks[ri].rank);
  if (it != index.end() && it->second < per_rank.size()) per_rank[it->second].blame_ns += ns;
}

// Per rank: how much later than the others its symmetric collectives end (after alignment).
void measure_late_ends(CommWork& w) {
  std::vector<std::vector<double>> late(w.m.ranks.size());
  std::vector<double> ends;
  for (size_t ei = 0; ei < w.x.list.size(); ++ei) {
    const Exchange& ex = w.x.list[ei];
    if (!ex.symmetric || ex.host_timed || ex.members.size() < 3) continue;
    ends.assign(w.outcomes[ei].end.begin(), w.outcomes[ei].end.end());
    const double mid = median(ends);
    for (size_t i = 0; i < ex.members.size(); ++i)
      late[ex.members[i].rank].push_back(double(w.outcomes[ei].end[i]) - mid);
  }
  for (size_t ri = 0; ri < late.size(); ++ri) w.rep.ranks[ri].late_end_ns = median(std::move(late[ri]));
}

// What of an exchange does not depend on the exchanges before it: its last, first and latest
// arrivals, who arrived last (within the floor), who waited how long, and its members' units in
// order. All exchanges' at once on every core (issue 29: at 10,000 ranks the members' sorting
// alone took a third of the serial pass below).
void arrivals(CommWork& w, size_t ei) {
  const Exchange& ex = w.x.list[ei];
  Outcome& out = w.outcomes[ei];
  const int n = static_cast<int>(ex.members.size());
  out.start.reserve(n);
  out.end.reserve(n);
  for (const ExchangeMember& mb : ex.members) {
    out.start.push_back(w.aligned(ex, mb, mb.start));
    out.end.push_back(w.aligned(ex, mb, mb.end));
  }
  const double floor = ex.host_timed ? w.opt.host_lead_floor_ns : w.opt.lead_floor_ns;
  const int64_t last = *std::max_element(out.start.begin(), out.start.end());
  const int64_t first = *std::min_element(out.start.begin(), out.start.end());
  out.last_arrival = last;
  out.first_arrival = first;
  out.latest_end = *std::max_element(out.end.begin(), out.end.end());
  out.is_last.assign(n, false);
  if (double(last - first) >= floor)
    for (int i = 0; i < n; ++i) out.is_last[i] = double(last - out.start[i]) <= floor;
  out.nlast = static_cast<int>(std::count(out.is_last.begin(), out.is_last.end(), true));
  out.wait.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const double kernel = ex.host_timed ? 1e18 : double(out.end[i] - out.start[i]);
    out.wait[i] = std::clamp(double(last - out.start[i]), 0.0, kernel);
    out.total_wait += out.wait[i];
    if (!out.is_last[i]) out.others_wait += out.wait[i];
  }
  // The latest waiter, with nothing carried: what every last rank without a carried wait sees.
  out.latest_waiter = double(first);
  for (int j = 0; j < n; ++j)
    if (!out.is_last[j]) out.latest_waiter = std::max(out.latest_waiter, double(out.start[j]));
  out.units.reserve(n);
  for (const ExchangeMember& mb : ex.members) out.units.push_back(mb.unit);
  std::sort(out.units.begin(), out.units.end());
}

// A rank's arrivals as the exchanges are scored, kept apart from its CommRankStats (300 bytes,
// with strings) so that each exchange's pass over its members streams 32 bytes a rank (issue 29:
// at 100,000 ranks, 30 MB an exchange otherwise). Copied into the stats at the end; each starts
// from 0, as the stats' fields do, so the sums are the same.
struct ArrivalTally {
  uint64_t collectives = 0, last = 0;
  double kernel_ns = 0, waited_ns = 0;
};

// One exchange: who arrived last, who waited how long, the blame (passed on where the last rank
// was late because it waited just before), and its bandwidth. leads: per rank index, how much
// later than the median rank it arrived when last by itself.
void score_exchange(CommWork& w, size_t ei, std::vector<Previous>& prev, std::vector<std::vector<double>>& leads,
                    std::vector<std::shared_ptr<const std::vector<size_t>>>& last_sets,
                    std::vector<ArrivalTally>& tally) {
  const Exchange& ex = w.x.list[ei];
  Outcome& out = w.outcomes[ei];
  const size_t ci = w.comm_at.at(ex.comm);
  const int n = static_cast<int>(ex.members.size());
  auto& per_rank = w.per_comm_rank[ci];
  const double floor = ex.host_timed ? w.opt.host_lead_floor_ns : w.opt.lead_floor_ns;
  const int64_t last = out.last_arrival, first = out.first_arrival, latest_end = out.latest_end;
  const std::vector<char>& is_last = out.is_last;
  const int nlast = out.nlast;
  const double others_wait = out.others_wait, latest_waiter = out.latest_waiter;
  out.unit_set = member_set(std::move(out.units), last_sets[ci]);
  const std::vector<size_t>* const units = out.unit_set.get();
  std::map<size_t, double> blamed;  // rank index -> ns
  std::vector<bool> own_last(n, false);
  for (int i = 0; i < n; ++i) {
    const ExchangeMember& mb = ex.members[i];
    if (nlast ? !is_last[i] : out.start[i] != last) continue;
    // Late because its own previous exchange made it wait: against the waiters who were not in
    // that exchange (those who were ended with it), that wait delayed it, and that part of their
    // wait goes to whom it waited for. A pipeline stage that waited on the next stage's receive
    // reaches the previous stage's send late by as much.
    const Previous& p = prev[mb.unit];
    const double carried =
        !ex.host_timed && p.valid && double(p.end) <= double(out.start[i]) + floor && p.wait >= floor ? p.wait : 0;
    // The latest waiter's arrival after the carried wait. Nothing is carried to a waiter that
    // was in that exchange too: with the same members, none.
    double inherited = 0, latest_against = latest_waiter;
    if (carried > 0 && p.units != units)
      for (int j = 0; j < n; ++j) {
        if (is_last[j]) continue;
        const bool was_there = p.units && std::binary_search(p.units->begin(), p.units->end(), ex.members[j].unit);
        const double c = was_there ? 0 : carried;
        inherited += std::min(out.wait[j], c);
        latest_against = std::max(latest_against, double(out.start[j]) + c);
      }
    inherited /= std::max(1, nlast);
    const double share = nlast ? others_wait / nlast : others_wait;
    blamed[mb.rank] += share - inherited;
    if (p.waited_for)
      for (const auto& [ri, f] : *p.waited_for) blamed[ri] += inherited * f;
    // Last by itself when most of its lateness is its own (and that is more than noise).
    const double own = double(out.start[i]) - latest_against;
    own_last[i] = nlast && (inherited == 0 || (own >= floor && own >= 0.5 * (double(out.start[i]) - latest_waiter)));
    if (!nlast) break;
  }
  double total = 0;
  for (const auto& [ri, ns] : blamed) total += ns;
  for (const auto& [ri, ns] : blamed) {
    if (ns <= 0) continue;
    credit(w, ci, ri, ns);
    out.blamed.push_back({ri, total > 0 ? ns / total : 0});
  }
  if (std::count(own_last.begin(), own_last.end(), true)) {  // arrivals after the first (epoch ns exceed a double's 53 bits)
    std::vector<double> after_first(n);
    for (int i = 0; i < n; ++i) after_first[i] = double(out.start[i] - first);
    const double median_arrival = median(after_first);
    for (int i = 0; i < n; ++i)
      if (own_last[i]) leads[ex.members[i].rank].push_back(after_first[i] - median_arrival);
  }
  for (int i = 0; i < n; ++i) {
    const ExchangeMember& mb = ex.members[i];
    ArrivalTally& s = tally[mb.rank];
    ++s.collectives;
    if (!ex.host_timed) s.kernel_ns += double(out.end[i] - out.start[i]);
    s.waited_ns += out.wait[i];
    if (mb.comm_rank >= 0 && size_t(mb.comm_rank) >= per_rank.size()) per_rank.resize(mb.comm_rank + 1);
    CommSummary::PerRank& pr = per_rank[std::max(0, mb.comm_rank)];
    pr.rank = w.m.ranks[mb.rank].rank;
    pr.waited_ns += out.wait[i];
    ++pr.arrivals;
    pr.chance += 1.0 / n;
    if (own_last[i]) {
      ++s.last;
      ++pr.last;
      out.last_ranks.push_back(pr.rank);
    }
    if (!ex.host_timed) prev[mb.unit] = {true, out.end[i], is_last[i] ? 0.0 : out.wait[i], &out.blamed, units};
  }
  ++w.rep.comms[ci].arrivals;
  std::vector<char>().swap(out.is_last);

  const std::string& func = w.m.strings.at(ex.func);
  out.transfer_ns = double(latest_end - last);
  out.size = algbw_bytes(func, ex.bytes, n);
  if (ex.ops == 1 && !ex.p2p && !ex.host_timed && out.transfer_ns > 0 && out.size > 0) {
    out.algbw = out.size / out.transfer_ns;  // bytes per ns = GB/s
    out.busbw = out.algbw * bus_factor(func, n);
  }
}

// Arrivals, waits, blame and bandwidth per exchange, in the order the last ranks arrived (so an
// exchange's blame is known before a later one passes it on).
void score_exchanges(CommWork& w) {
  const auto& list = w.x.list;
  w.outcomes.resize(list.size());
  w.per_comm_rank.resize(w.rep.comms.size());
  w.comm_rank_of.resize(w.rep.comms.size());
  for (size_t ci = 0; ci < w.rep.comms.size(); ++ci) w.per_comm_rank[ci].resize(std::max(0, w.rep.comms[ci].nranks));
  std::vector<size_t> order(list.size());
  parallel_for(list.size(), [&](size_t ei) {  // exchanges are independent: on every core
    order[ei] = ei;
    arrivals(w, ei);
  });
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return w.outcomes[a].last_arrival < w.outcomes[b].last_arrival; });
  std::vector<Previous> prev(w.x.units.size());
  std::vector<std::vector<double>> leads(w.m.ranks.size());
  std::vector<std::shared_ptr<const std::vector<size_t>>> last_sets(w.rep.comms.size());  // per communicator
  // The late ends (GPU ends only) need only the arrivals: beside the pass in order, which is one
  // thread's (issue 29). They write only late_end_ns of the ranks' stats, which that pass does not.
  std::future<void> late_ends;
  if (w.opt.fit_clocks) late_ends = run_beside([&w] { measure_late_ends(w); });
  std::vector<ArrivalTally> tally(w.m.ranks.size());
  for (size_t ei : order) score_exchange(w, ei, prev, leads, last_sets, tally);
  for (size_t ri = 0; ri < tally.size(); ++ri) {
    CommRankStats& s = w.rep.ranks[ri];
    s.collectives = tally[ri].collectives;
    s.last = tally[ri].last;
    s.kernel_ns = tally[ri].kernel_ns;
    s.waited_ns = tally[ri].waited_ns;
  }
  for (size_t ri = 0; ri < leads.size(); ++ri) w.rep.ranks[ri].lateness_ns = median(std::move(leads[ri]));
  if (late_ends.valid()) late_ends.get();
}

// The exchanges with the most waiting, in full.
void list_worst(CommWork& w) {
  const auto& list = w.x.list;
  const auto& outcomes = w.outcomes;
  std::vector<size_t> order(list.size());
  for (size_t ei = 0; ei < order.size(); ++ei) order[ei] = ei;
  size_t keep = std::min(w.opt.worst_listed, order.size());
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](size_t a, size_t b) { return outcomes[a].total_wait > outcomes[b].total_wait; });
  for (size_t k = 0; k < keep; ++k) {
    const Exchange& ex = list[order[k]];
    const Outcome& o = outcomes[order[k]];
    if (o.total_wait <= 0) break;
    CollectiveDetail d;
    d.comm = ex.comm;
    d.func = ex.func;
    d.seq = ex.seq;
    d.ops = ex.ops;
    d.p2p = ex.p2p;
    d.host_timed = ex.host_timed;
    d.bytes = ex.bytes;
    d.last_ranks = o.last_ranks;
    for (const auto& [ri, share] : o.blamed) d.blamed_ranks.push_back(w.m.ranks[ri].rank);
    d.total_wait_ns = o.total_wait;
    d.transfer_ns = o.transfer_ns;
    d.algbw_gbps = o.algbw;
    d.busbw_gbps = o.busbw;
    d.first_arrival_ns = *std::min_element(o.start.begin(), o.start.end());
    for (size_t i = 0; i < ex.members.size(); ++i) {
      d.ranks.push_back(w.m.ranks[ex.members[i].rank].rank);
      d.arrival_ns.push_back(double(o.start[i] - d.first_arrival_ns));
      d.wait_ns.push_back(o.wait[i]);
    }
    w.rep.worst.push_back(std::move(d));
  }
}

// Slow collectives: against the job's median for the same function and size.
void list_slow(CommWork& w) {
  const auto& list = w.x.list;
  const auto& outcomes = w.outcomes;
  std::map<std::pair<uint32_t, int>, std::vector<double>> bucket_bw;
  auto bucket_of = [&](size_t ei) {
    return std::make_pair(list[ei].func, static_cast<int>(std::floor(std::log2(std::max(1.0, outcomes[ei].size)))));
  };
  for (size_t ei = 0; ei < list.size(); ++ei)
    if (outcomes[ei].busbw > 0) bucket_bw[bucket_of(ei)].push_back(outcomes[ei].busbw);
  std::map<std::pair<uint32_t, int>, double> bucket_median;
  for (auto& [b, v] : bucket_bw)
    if (static_cast<int>(v.size()) >= w.opt.slow_min_samples) bucket_median[b] = median(v);
  for (size_t ei = 0; ei < list.size(); ++ei) {
    const Outcome& o = outcomes[ei];
    auto it = bucket_median.find(bucket_of(ei));
    if (o.busbw <= 0 || it == bucket_median.end() || o.busbw >= w.opt.slow_factor * it->second) continue;
    CommSummary& cs = w.rep.comms[w.comm_at.at(list[ei].comm)];
    ++cs.slow_count;
    cs.slow.push_back({list[ei].func, list[ei].seq, list[ei].bytes, o.last_arrival, o.transfer_ns, o.algbw, o.busbw,
                       it->second, o.last_ranks});
  }
  for (CommSummary& cs : w.rep.comms) {
    std::sort(cs.slow.begin(), cs.slow.end(), [](const SlowCollective& a, const SlowCollective& b) {
      return a.busbw_gbps / a.median_busbw_gbps < b.busbw_gbps / b.median_busbw_gbps;
    });
    if (cs.slow.size() > w.opt.slow_listed) cs.slow.resize(w.opt.slow_listed);
  }
}

// The report windows in which the rank was (also) persistently last in communicator ci.
std::vector<int> last_windows(const CommWork& w, size_t ci, const CommSummary::PerRank& pr) {
  const ScoreReport& scores = w.scores;
  const int nwin = static_cast<int>(scores.windows.size());
  std::vector<int> total(nwin, 0), mine(nwin, 0), out;
  for (size_t ei = 0; nwin && ei < w.x.list.size(); ++ei) {
    const Exchange& ex = w.x.list[ei];
    if (w.comm_at.at(ex.comm) != ci) continue;
    bool member = false;
    for (const ExchangeMember& mb : ex.members) member |= w.m.ranks[mb.rank].rank == pr.rank;
    if (!member) continue;
    double k = std::floor(double(w.outcomes[ei].last_arrival - scores.start_ns) / (scores.window_s * 1e9));
    int win = static_cast<int>(std::clamp(k, 0.0, double(nwin - 1)));
    ++total[win];
    const auto& lr = w.outcomes[ei].last_ranks;
    mine[win] += std::find(lr.begin(), lr.end(), pr.rank) != lr.end();
  }
  for (int win = 0; win < nwin; ++win)
    if (total[win] >= 3 && double(mine[win]) / total[win] >= pr.last_share_threshold)
      out.push_back(scores.windows[win].index);
  return out;
}

// Per communicator and rank; persistent last arrivers are stragglers of scope "comm". A rank's
// bar is halfway between chance (1 / members of its exchanges: 1/n for collectives, 1/2 for p2p
// pairs) and always.
void list_last_arrivers(CommWork& w) {
  CommReport& rep = w.rep;
  for (size_t ci = 0; ci < w.per_comm_rank.size(); ++ci)
    for (CommSummary::PerRank& pr : w.per_comm_rank[ci]) {
      if (pr.rank < 0) continue;
      pr.last_share = pr.arrivals ? double(pr.last) / double(pr.arrivals) : 0;
      pr.last_share_threshold = pr.arrivals ? (1.0 + pr.chance / double(pr.arrivals)) / 2 : 1;
      rep.comms[ci].per_rank.push_back(pr);
    }
  std::unordered_map<int, const std::string*> host_of;
  for (const CommRankStats& r : rep.ranks) host_of[r.rank] = &r.host;  // the last one, as before
  for (size_t ci = 0; ci < rep.comms.size(); ++ci) {
    const CommSummary& cs = rep.comms[ci];
    for (const CommSummary::PerRank& pr : cs.per_rank) {
      if (pr.arrivals < static_cast<uint64_t>(w.opt.min_collectives) ||
          pr.last < static_cast<uint64_t>(w.opt.min_last) || pr.last_share < pr.last_share_threshold)
        continue;
      Straggler s;
      s.rank = pr.rank;
      if (auto it = host_of.find(pr.rank); it != host_of.end()) s.host = *it->second;
      s.scope = "comm";
      s.section = comm_label(w.m, cs);
      s.metric = "last_arrival";
      s.score = 1 - pr.last_share;
      s.threshold = 1 - pr.last_share_threshold;
      s.windows = last_windows(w, ci, pr);
      rep.stragglers.push_back(std::move(s));
    }
  }
  std::stable_sort(rep.stragglers.begin(), rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });
}

}  // namespace

CommReport analyze_collectives(const RunModel& m, const ScoreReport& scores, const CommOptions& opt) {
  CommReport rep;
  rep.options = opt;
  CommWork w{m, scores, opt, rep};
  if (!collect(w)) return rep;
  // seq_gaps reads only the model: on a thread of its own while the exchanges are matched and
  // scored (issue 29: 40 ms of one thread at the end of the collectives at 10,000 ranks of
  // summaries, where the other core had nothing left to do).
  std::future<std::map<uint32_t, uint64_t>> gaps = run_beside([&m] { return seq_gaps(m); });
  summarize_matches(w);
  if (opt.fit_clocks) align_clocks(w);  // not for collectives timed on the host (issue 25)
  score_exchanges(w);
  list_worst(w);
  list_slow(w);
  for (const auto& [comm, n] : gaps.get())
    if (auto it = w.comm_at.find(comm); it != w.comm_at.end()) rep.comms[it->second].seq_gaps = n;
  list_last_arrivers(w);
  return rep;
}

}  // namespace laggard::report
