#include "comm_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "clock_offsets.h"
#include "stats.h"

namespace laggard::report {
namespace {

struct Key {
  uint32_t comm, func;
  uint64_t seq;
  bool operator==(const Key& o) const { return comm == o.comm && func == o.func && seq == o.seq; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = k.seq * 0x9e3779b97f4a7c15ull ^ (uint64_t{k.comm} << 32 | k.func);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct Entry {
  size_t rank;  // index into model.ranks
  const Collective* c;
};

struct Group {  // one collective, matched on every rank of its communicator
  Key key;
  int n = 0;
  std::vector<Entry> by_comm_rank;
};

struct Outcome {  // what the analysis found for one matched group
  int64_t last_arrival = 0;
  double total_wait = 0;
  double transfer_ns = 0, algbw = 0, busbw = 0, size = 0;
  std::vector<int> last_ranks;  // global ranks
};

bool symmetric(const std::string& func) {
  return func == "AllReduce" || func == "AllGather" || func == "ReduceScatter";
}

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
// any rank saw.
std::map<uint32_t, uint64_t> seq_gaps(const RunModel& m) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> seqs;  // (comm, func)
  for (const RankData& r : m.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const Collective& c : w.collectives)
        if (!c.p2p) seqs[{c.comm, c.func}].push_back(c.seq);
  std::map<uint32_t, uint64_t> gaps;
  for (auto& [key, v] : seqs) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    gaps[key.first] += (v.back() - v.front() + 1) - v.size();
  }
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

using ByKey = std::unordered_map<Key, std::vector<Entry>, KeyHash>;

// What the steps of analyze_collectives pass on to each other.
struct CommWork {
  const RunModel& m;
  const ScoreReport& scores;
  const CommOptions& opt;
  CommReport& rep;
  std::vector<std::string> hosts;      // per rank index
  std::map<uint32_t, size_t> comm_at;  // comm id -> index in rep.comms
  std::vector<Group> groups;           // matched on every rank, by (comm, func, seq)
  ClockOffsets clock;
  std::vector<Outcome> outcomes;       // per group
  // [comm index][comm rank]; rank -1: the rank took part in none of its matched collectives.
  std::vector<std::vector<CommSummary::PerRank>> per_comm_rank;
  // A GPU time of rank index ri on the reference clock.
  int64_t aligned(size_t ri, int64_t t) const { return t - std::llround(clock.correction(ri, t)); }
};

// Every rank's operations: p2p counted, collectives keyed for matching across ranks.
ByKey collect(CommWork& w) {
  ByKey by_key;
  const size_t R = w.m.ranks.size();
  w.rep.ranks.resize(R);
  w.hosts.resize(R);
  for (size_t ri = 0; ri < R; ++ri) {
    CommRankStats& s = w.rep.ranks[ri];
    s.rank = w.m.ranks[ri].rank;
    s.host = w.hosts[ri] = w.m.ranks[ri].host;
    s.gpu_shift_ns = w.m.ranks[ri].nccl_gpu_shift_ns;
    s.nccl_plugin = plugin_status(w.m.ranks[ri]);
    for (const CaptureWindow& cw : w.m.ranks[ri].windows) {
      for (const CaptureWindow::P2pCounts& p : cw.p2p) {
        w.rep.p2p += p.sends + p.recvs;
        s.p2p_ops += p.sends + p.recvs;
        s.p2p_bytes += p.send_bytes + p.recv_bytes;
      }
      for (const Collective& c : cw.collectives) {
        s.suspect += c.gpu_time_suspect != nullptr;
        ++w.rep.ops;
        if (c.p2p) {
          ++w.rep.p2p;
          ++s.p2p_ops;
          s.p2p_bytes += c.bytes;
          if (c.gpu_start_ns && c.gpu_end_ns > c.gpu_start_ns) s.p2p_gpu_ns += double(c.gpu_end_ns - c.gpu_start_ns);
          continue;
        }
        by_key[{c.comm, c.func, c.seq}].push_back({ri, &c});
      }
    }
  }
  return by_key;
}

CommSummary& summary_of(CommWork& w, const Collective& c) {
  auto [it, added] = w.comm_at.emplace(c.comm, w.rep.comms.size());
  if (added) {
    CommSummary s;
    s.comm = c.comm;
    s.name = c.comm_name;
    s.nranks = c.comm_nranks;
    s.ranks.assign(std::max(0, c.comm_nranks), -1);
    s.last_share_threshold = c.comm_nranks > 0 ? (1.0 + 1.0 / c.comm_nranks) / 2 : 1;
    w.rep.comms.push_back(std::move(s));
  }
  return w.rep.comms[it->second];
}

// The collectives seen on every rank of their communicator with usable GPU times.
void match(CommWork& w, ByKey& by_key) {
  for (auto& [key, entries] : by_key) {
    const Collective& first = *entries.front().c;
    CommSummary& cs = summary_of(w, first);
    const int n = first.comm_nranks;
    Group g{key, n, std::vector<Entry>(std::max(0, n), Entry{0, nullptr})};
    bool complete = n >= 2;
    for (const Entry& e : entries) {
      int cr = e.c->comm_rank;
      if (cr < 0 || cr >= n || e.c->comm_nranks != n) {
        complete = false;
        continue;
      }
      if (!g.by_comm_rank[cr].c) g.by_comm_rank[cr] = e;  // a restarted communicator may repeat seqs
      if (cs.ranks[cr] < 0) cs.ranks[cr] = w.m.ranks[e.rank].rank;
    }
    bool suspect = false;
    for (const Entry& e : g.by_comm_rank) {
      complete = complete && e.c && e.c->gpu_start_ns && e.c->gpu_end_ns >= e.c->gpu_start_ns;
      suspect |= e.c && e.c->gpu_time_suspect;
    }
    if (!complete || suspect) {
      ++cs.incomplete;
      ++w.rep.incomplete;
      cs.suspect += suspect;
      w.rep.suspect += suspect;
      continue;
    }
    w.groups.push_back(std::move(g));
  }
  std::sort(w.groups.begin(), w.groups.end(), [](const Group& a, const Group& b) {
    return std::tie(a.key.comm, a.key.func, a.key.seq) < std::tie(b.key.comm, b.key.func, b.key.seq);
  });
  w.rep.matched = w.groups.size();
}

// Align clocks: symmetric collectives end together on all ranks (rooted ones need not).
void align_clocks(CommWork& w) {
  const RunModel& m = w.m;
  CommReport& rep = w.rep;
  bool any_symmetric = false;
  for (const Group& g : w.groups) any_symmetric |= symmetric(m.strings.at(g.key.func));
  std::vector<ClockSample> samples;
  for (size_t gi = 0; gi < w.groups.size(); ++gi) {
    if (any_symmetric && !symmetric(m.strings.at(w.groups[gi].key.func))) continue;
    for (const Entry& e : w.groups[gi].by_comm_rank) samples.push_back({gi, e.rank, e.c->gpu_end_ns});
  }
  w.clock = estimate_clock_offsets(samples, w.hosts, w.groups.size());
  const ClockOffsets& co = w.clock;
  rep.clock.corrected = !samples.empty();
  rep.clock.reference_rank = samples.empty() ? -1 : m.ranks[co.reference_rank].rank;
  rep.clock.reference_time_ns = co.t_ref_ns;
  rep.clock.max_abs_offset_ns = co.max_abs_offset_ns;
  rep.clock.max_abs_drift_ppm = co.max_abs_drift_ppm;
  rep.clock.residual_ns = co.residual_ns;
  rep.clock.samples = co.samples;
  for (const auto& h : co.hosts) {
    CommReport::Clock::Host out{h.host, h.offset_ns, h.spread_ns, {}};
    for (size_t ri : h.ranks) out.ranks.push_back(m.ranks[ri].rank);
    rep.clock.hosts.push_back(std::move(out));
  }
  for (size_t ri = 0; ri < m.ranks.size(); ++ri) {
    rep.ranks[ri].clock_offset_ns = co.offset_ns[ri];
    rep.ranks[ri].clock_drift_ppm = co.drift_ppm[ri];
    rep.ranks[ri].clock_residual_ns = co.rank_residual_ns[ri];
    rep.ranks[ri].clock_samples = co.rank_samples[ri];
  }
}

// One collective: who arrived last, who waited how long, the blame, and its bandwidth.
// leads: per rank index, how much later than the median rank it arrived when last.
void score_group(CommWork& w, size_t gi, std::vector<int64_t>& start, std::vector<int64_t>& end,
                 std::vector<std::vector<double>>& leads) {
  const Group& g = w.groups[gi];
  const size_t ci = w.comm_at.at(g.key.comm);
  const int n = g.n;
  auto& per_rank = w.per_comm_rank[ci];
  if (per_rank.size() < size_t(n)) per_rank.resize(n);  // a communicator re-made with more ranks
  start.assign(n, 0);
  end.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const Entry& e = g.by_comm_rank[i];
    start[i] = w.aligned(e.rank, e.c->gpu_start_ns);
    end[i] = w.aligned(e.rank, e.c->gpu_end_ns);
  }
  const int64_t last = *std::max_element(start.begin(), start.end());
  const int64_t first = *std::min_element(start.begin(), start.end());
  const int64_t latest_end = *std::max_element(end.begin(), end.end());
  std::vector<bool> is_last(n, false);
  if (double(last - first) >= w.opt.lead_floor_ns)
    for (int i = 0; i < n; ++i) is_last[i] = double(last - start[i]) <= w.opt.lead_floor_ns;
  int nlast = static_cast<int>(std::count(is_last.begin(), is_last.end(), true));
  if (nlast) {  // arrivals after the first: epoch nanoseconds do not fit a double's 53 bits
    std::vector<double> after_first(n);
    for (int i = 0; i < n; ++i) after_first[i] = double(start[i] - first);
    const double median_arrival = median(after_first);
    for (int i = 0; i < n; ++i)
      if (is_last[i]) leads[g.by_comm_rank[i].rank].push_back(after_first[i] - median_arrival);
  }
  double others_wait = 0;
  Outcome& out = w.outcomes[gi];
  out.last_arrival = last;
  for (int i = 0; i < n; ++i) {
    const size_t ri = g.by_comm_rank[i].rank;
    double kernel = double(end[i] - start[i]);
    double wait = std::clamp(double(last - start[i]), 0.0, kernel);
    out.total_wait += wait;
    CommRankStats& s = w.rep.ranks[ri];
    ++s.collectives;
    s.kernel_ns += kernel;
    s.waited_ns += wait;
    CommSummary::PerRank& pr = per_rank[i];
    pr.rank = w.m.ranks[ri].rank;
    pr.waited_ns += wait;
    if (is_last[i]) {
      ++s.last;
      ++pr.last;
      out.last_ranks.push_back(w.m.ranks[ri].rank);
    } else {
      others_wait += wait;
    }
  }
  // Blame: split among the last arrivers; with none (arrivals within the floor) the little
  // waiting there was goes to whoever came latest.
  for (int i = 0; i < n; ++i) {
    if (nlast ? !is_last[i] : start[i] != last) continue;
    double share = others_wait / std::max(1, nlast);
    w.rep.ranks[g.by_comm_rank[i].rank].blame_ns += share;
    per_rank[i].blame_ns += share;
    if (!nlast) break;
  }
  ++w.rep.comms[ci].collectives;

  const std::string& func = w.m.strings.at(g.key.func);
  out.transfer_ns = double(latest_end - last);
  uint64_t bytes = 0;
  for (const Entry& e : g.by_comm_rank) bytes = std::max(bytes, e.c->bytes);
  out.size = algbw_bytes(func, bytes, n);
  if (out.transfer_ns > 0 && out.size > 0) {
    out.algbw = out.size / out.transfer_ns;  // bytes per ns = GB/s
    out.busbw = out.algbw * bus_factor(func, n);
  }
}

// Arrivals, waits, blame and bandwidth per collective.
void score_groups(CommWork& w) {
  w.outcomes.resize(w.groups.size());
  w.per_comm_rank.resize(w.rep.comms.size());
  for (size_t ci = 0; ci < w.rep.comms.size(); ++ci) w.per_comm_rank[ci].resize(std::max(0, w.rep.comms[ci].nranks));
  std::vector<int64_t> start, end;
  std::vector<std::vector<double>> leads(w.m.ranks.size());
  for (size_t gi = 0; gi < w.groups.size(); ++gi) score_group(w, gi, start, end, leads);
  for (size_t ri = 0; ri < leads.size(); ++ri) w.rep.ranks[ri].lateness_ns = median(std::move(leads[ri]));
}

// The collectives with the most waiting, in full.
void list_worst(CommWork& w) {
  const auto& groups = w.groups;
  const auto& outcomes = w.outcomes;
  std::vector<size_t> order(groups.size());
  for (size_t gi = 0; gi < order.size(); ++gi) order[gi] = gi;
  size_t keep = std::min(w.opt.worst_listed, order.size());
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](size_t a, size_t b) { return outcomes[a].total_wait > outcomes[b].total_wait; });
  for (size_t k = 0; k < keep; ++k) {
    const Group& g = groups[order[k]];
    const Outcome& o = outcomes[order[k]];
    if (o.total_wait <= 0) break;
    CollectiveDetail d;
    d.comm = g.key.comm;
    d.func = g.key.func;
    d.seq = g.key.seq;
    d.last_ranks = o.last_ranks;
    d.total_wait_ns = o.total_wait;
    d.transfer_ns = o.transfer_ns;
    d.algbw_gbps = o.algbw;
    d.busbw_gbps = o.busbw;
    std::vector<int64_t> arrive;
    for (const Entry& e : g.by_comm_rank) {
      arrive.push_back(w.aligned(e.rank, e.c->gpu_start_ns));
      d.ranks.push_back(w.m.ranks[e.rank].rank);
      d.bytes = std::max(d.bytes, e.c->bytes);
    }
    d.first_arrival_ns = *std::min_element(arrive.begin(), arrive.end());
    for (size_t i = 0; i < arrive.size(); ++i) {
      const Collective& c = *g.by_comm_rank[i].c;
      d.arrival_ns.push_back(double(arrive[i] - d.first_arrival_ns));
      d.wait_ns.push_back(std::clamp(double(o.last_arrival - arrive[i]), 0.0, double(c.gpu_end_ns - c.gpu_start_ns)));
    }
    w.rep.worst.push_back(std::move(d));
  }
}

// Slow collectives: against the job's median for the same function and size.
void list_slow(CommWork& w) {
  const auto& groups = w.groups;
  const auto& outcomes = w.outcomes;
  std::map<std::pair<uint32_t, int>, std::vector<double>> bucket_bw;
  auto bucket_of = [&](size_t gi) {
    return std::make_pair(groups[gi].key.func, static_cast<int>(std::floor(std::log2(std::max(1.0, outcomes[gi].size)))));
  };
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (outcomes[gi].busbw > 0) bucket_bw[bucket_of(gi)].push_back(outcomes[gi].busbw);
  std::map<std::pair<uint32_t, int>, double> bucket_median;
  for (auto& [b, v] : bucket_bw)
    if (static_cast<int>(v.size()) >= w.opt.slow_min_samples) bucket_median[b] = median(v);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Outcome& o = outcomes[gi];
    auto it = bucket_median.find(bucket_of(gi));
    if (o.busbw <= 0 || it == bucket_median.end() || o.busbw >= w.opt.slow_factor * it->second) continue;
    CommSummary& cs = w.rep.comms[w.comm_at.at(groups[gi].key.comm)];
    ++cs.slow_count;
    uint64_t bytes = 0;
    for (const Entry& e : groups[gi].by_comm_rank) bytes = std::max(bytes, e.c->bytes);
    cs.slow.push_back({groups[gi].key.func, groups[gi].key.seq, bytes, o.last_arrival, o.transfer_ns, o.algbw, o.busbw,
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
std::vector<int> last_windows(const CommWork& w, size_t ci, const CommSummary& cs, int rank) {
  const ScoreReport& scores = w.scores;
  const int nwin = static_cast<int>(scores.windows.size());
  std::vector<int> total(nwin, 0), mine(nwin, 0), out;
  for (size_t gi = 0; nwin && gi < w.groups.size(); ++gi) {
    if (w.comm_at.at(w.groups[gi].key.comm) != ci) continue;
    double k = std::floor(double(w.outcomes[gi].last_arrival - scores.start_ns) / (scores.window_s * 1e9));
    int win = static_cast<int>(std::clamp(k, 0.0, double(nwin - 1)));
    ++total[win];
    const auto& lr = w.outcomes[gi].last_ranks;
    mine[win] += std::find(lr.begin(), lr.end(), rank) != lr.end();
  }
  for (int win = 0; win < nwin; ++win)
    if (total[win] >= 3 && double(mine[win]) / total[win] >= cs.last_share_threshold)
      out.push_back(scores.windows[win].index);
  return out;
}

// Per communicator and rank; persistent last arrivers are stragglers of scope "comm".
void list_last_arrivers(CommWork& w) {
  CommReport& rep = w.rep;
  for (size_t ci = 0; ci < w.per_comm_rank.size(); ++ci)
    for (CommSummary::PerRank& pr : w.per_comm_rank[ci]) {
      if (pr.rank < 0) continue;
      CommSummary& cs = rep.comms[ci];
      pr.last_share = cs.collectives ? double(pr.last) / double(cs.collectives) : 0;
      cs.per_rank.push_back(pr);
    }
  std::unordered_map<int, const std::string*> host_of;
  for (const CommRankStats& r : rep.ranks) host_of[r.rank] = &r.host;  // the last one, as before
  for (size_t ci = 0; ci < rep.comms.size(); ++ci) {
    const CommSummary& cs = rep.comms[ci];
    for (const CommSummary::PerRank& pr : cs.per_rank) {
      if (cs.collectives < static_cast<uint64_t>(w.opt.min_collectives) ||
          pr.last < static_cast<uint64_t>(w.opt.min_last) || pr.last_share < cs.last_share_threshold)
        continue;
      Straggler s;
      s.rank = pr.rank;
      if (auto it = host_of.find(pr.rank); it != host_of.end()) s.host = *it->second;
      s.scope = "comm";
      s.section = comm_label(w.m, cs);
      s.metric = "last_arrival";
      s.score = 1 - pr.last_share;
      s.threshold = 1 - cs.last_share_threshold;
      s.windows = last_windows(w, ci, cs, pr.rank);
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
  ByKey by_key = collect(w);
  if (by_key.empty()) return rep;
  match(w, by_key);
  if (opt.fit_clocks) align_clocks(w);
  score_groups(w);
  list_worst(w);
  list_slow(w);
  for (const auto& [comm, n] : seq_gaps(m))
    if (auto it = w.comm_at.find(comm); it != w.comm_at.end()) rep.comms[it->second].seq_gaps = n;
  list_last_arrivers(w);
  return rep;
}

}  // namespace laggard::report
