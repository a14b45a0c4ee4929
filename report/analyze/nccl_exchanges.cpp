#include "nccl_exchanges.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <unordered_map>

namespace laggard::report {
namespace {

struct Entry {
  size_t rank = 0, unit = 0;
  const Collective* c = nullptr;
};

bool gpu_usable(const Collective& c) {
  return c.gpu_start_ns && c.gpu_end_ns >= c.gpu_start_ns && !c.gpu_time_suspect && !c.gpu_shifted;
}
bool shifted(const Collective& c) {
  return c.gpu_shifted || (c.gpu_time_suspect && std::string_view(c.gpu_time_suspect) == "shifted");
}

// One operation as every rank (or both sides of a pair) saw it.
struct Match {
  uint32_t comm = StringTable::kNone;
  bool p2p = false;
  int nranks = 0;
  std::vector<Entry> slots;  // collectives: by communicator rank; p2p: the Send, then the Recv
  bool ambiguous = false;    // one side seen twice (files without p2p indices)
  enum State { kComplete, kShifted, kIncomplete } state = kIncomplete;
  bool suspect = false;
  // What judge() decides from, kept as each slot is filled (the operation is then in the cache; a
  // pass over the slots afterwards met each rank's operation again, 0.2-0.3 s at 100,000 ranks).
  size_t filled = 0;
  bool all_gpu = true, any_shift = false, only_shift = true;
  void count_in(const Collective& c) {
    const bool usable = gpu_usable(c), shift = shifted(c);
    ++filled;
    all_gpu &= usable;
    any_shift |= shift;
    if (!usable && !shift) only_shift = false;
    suspect |= c.gpu_time_suspect && !shift;
  }
};

struct CollKey {
  uint32_t comm, func;
  uint64_t seq;
  bool operator==(const CollKey& o) const { return comm == o.comm && func == o.func && seq == o.seq; }
};
struct PairKey {
  uint32_t comm;
  int src, dst;
  uint64_t index;
  bool operator==(const PairKey& o) const {
    return comm == o.comm && src == o.src && dst == o.dst && index == o.index;
  }
};
struct KeyHash {
  size_t operator()(const CollKey& k) const {
    return mix_bits(k.seq * 0x9e3779b97f4a7c15ull ^ (uint64_t{k.comm} << 32 | k.func));
  }
  size_t operator()(const PairKey& k) const {
    return mix_bits(k.index * 0x9e3779b97f4a7c15ull ^ (uint64_t{k.comm} << 32) ^ (uint64_t(uint32_t(k.src)) << 16) ^
               uint32_t(k.dst));
  }
};
struct PlanKey {  // one rank's plan on one communicator
  size_t rank;
  uint32_t comm;
  uint64_t group;
  bool operator==(const PlanKey& o) const { return rank == o.rank && comm == o.comm && group == o.group; }
};
struct PlanHash {
  size_t operator()(const PlanKey& k) const {
    return mix_bits(k.group * 0x9e3779b97f4a7c15ull ^ (uint64_t{k.comm} << 24) ^ k.rank);
  }
};

// One rank's (device, unit) of each device it named, in order of appearance (one or a few: a
// scan beats a std::map keyed by (rank, device) looked up once per operation).
using RankUnits = std::vector<std::pair<int, size_t>>;

size_t find_unit(const RankUnits& units, int device) {
  for (const auto& [d, u] : units)
    if (d == device) return u;
  return SIZE_MAX;
}

// Rank ri's clock units: one per CUDA device its communicators named (in order of appearance).
void add_units(const RunModel& m, size_t ri, Exchanges& x, RankUnits& units) {
  units.clear();
  x.unit_of_rank[ri] = x.units.size();
  for (const CaptureWindow& w : m.ranks[ri].windows)
    for (const Collective& c : w.collectives)
      if (find_unit(units, c.device) == SIZE_MAX) {
        units.push_back({c.device, x.units.size()});
        x.units.push_back({ri, c.device});
      }
  if (units.empty()) {
    units.push_back({-1, x.units.size()});
    x.units.push_back({ri, -1});
  }
  x.callback_delays.resize(x.units.size());
}

class Matcher {
 public:
  Matcher(const RunModel& m, Exchanges& x) : m_(m), x_(x) {}

  // Rank by rank, its units and then its operations: one rank's operations are read twice while
  // they are in the cache, not in two passes over every rank's.
  void add_all() {
    size_t total = 0;
    for (const RankData& r : m_.ranks)
      for (const CaptureWindow& w : r.windows) total += w.collectives.size();
    coll_.reserve(total / std::max<size_t>(1, m_.ranks.size()) + 16);
    x_.unit_of_rank.resize(m_.ranks.size());
    RankUnits units;
    for (size_t ri = 0; ri < m_.ranks.size(); ++ri) {
      add_units(m_, ri, x_, units);
      for (const CaptureWindow& w : m_.ranks[ri].windows)
        for (const Collective& c : w.collectives) add({ri, find_unit(units, c.device), &c});
    }
  }

  std::vector<Match>& matches() { return matches_; }
  const std::vector<std::pair<PlanKey, size_t>>& plan_links() const { return plan_links_; }

 private:
  // 0: not p2p, 1: Send, 2: Recv.
  int p2p_kind(const Collective& c) {
    if (!c.p2p) return 0;
    auto [it, added] = kind_of_func_.try_emplace(c.func, 0);
    if (added && c.func != StringTable::kNone) {
      const std::string& f = m_.strings.at(c.func);
      it->second = f == "Send" ? 1 : f == "Recv" ? 2 : 0;
    }
    return it->second;
  }

  size_t match_for(const Entry& e) {
    const Collective& c = *e.c;
    if (!c.p2p) {
      auto [it, added] = coll_.try_emplace(CollKey{c.comm, c.func, c.seq}, matches_.size());
      if (added) matches_.push_back({c.comm, false, c.comm_nranks, std::vector<Entry>(std::max(0, c.comm_nranks))});
      return it->second;
    }
    const bool send = p2p_kind(c) == 1;
    const PairKey key{c.comm, send ? c.comm_rank : c.peer, send ? c.peer : c.comm_rank, c.seq};
    auto [it, added] = pair_.try_emplace(key, matches_.size());
    if (added) matches_.push_back({c.comm, true, c.comm_nranks, std::vector<Entry>(2)});
    return it->second;
  }

  void add(const Entry& e) {
    const Collective& c = *e.c;
    if (c.p2p && (p2p_kind(c) == 0 || c.peer < 0 || c.peer == c.comm_rank)) return;
    if (!c.p2p && gpu_usable(c) && c.chan_host_stop_ns)
      x_.callback_delays[e.unit].push_back({c.gpu_end_ns, c.chan_host_stop_ns - c.gpu_end_ns});
    const size_t mi = match_for(e);
    Match& mt = matches_[mi];
    const int slot = c.p2p ? (p2p_kind(c) == 1 ? 0 : 1) : c.comm_rank;
    if (slot < 0 || slot >= static_cast<int>(mt.slots.size()) || c.comm_nranks != mt.nranks) {
      mt.ambiguous = true;
      return;
    }
    if (mt.slots[slot].c) {
      if (c.p2p) mt.ambiguous = true;  // collectives: a re-made communicator may repeat seqs; the first wins
      return;
    }
    mt.slots[slot] = e;
    mt.count_in(c);
    if (c.group) plan_links_.push_back({PlanKey{e.rank, c.comm, c.group}, mi});
  }

  const RunModel& m_;
  Exchanges& x_;
  std::vector<Match> matches_;
  std::unordered_map<CollKey, size_t, KeyHash> coll_;
  std::unordered_map<PairKey, size_t, KeyHash> pair_;
  std::unordered_map<uint32_t, int> kind_of_func_;
  std::vector<std::pair<PlanKey, size_t>> plan_links_;
};

void judge(Match& mt) {
  const bool all = mt.nranks >= 2 && !mt.ambiguous && mt.filled == mt.slots.size();
  mt.state = !all ? Match::kIncomplete : mt.all_gpu ? Match::kComplete : mt.any_shift && mt.only_shift ? Match::kShifted
                                                                                                        : Match::kIncomplete;
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), size_t{0}); }
  size_t find(size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(size_t a, size_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Ops of one rank's plan are one arrival: their matches are one exchange. Only usable matches
// join: an op the other side did not time (p2p beyond the timed ones, a dropped op) leaves its
// group's arrival to the others.
std::vector<std::vector<size_t>> components(const std::vector<Match>& matches,
                                            const std::vector<std::pair<PlanKey, size_t>>& links) {
  const size_t n = matches.size();
  UnionFind uf(n);
  std::unordered_map<PlanKey, size_t, PlanHash> first;
  for (const auto& [plan, mi] : links) {
    if (matches[mi].state == Match::kIncomplete) continue;
    auto [it, added] = first.emplace(plan, mi);
    if (!added) uf.join(it->second, mi);
  }
  std::vector<std::vector<size_t>> comps;
  std::unordered_map<size_t, size_t> comp_of_root;
  for (size_t i = 0; i < n; ++i) {
    auto [it, added] = comp_of_root.emplace(uf.find(i), comps.size());
    if (added) comps.emplace_back();
    comps[it->second].push_back(i);
  }
  return comps;
}

// Host timed only where one host clock serves every member and each has its enqueue time.
bool host_timeable(const RunModel& m, const std::vector<Match>& matches, const std::vector<size_t>& comp) {
  const std::string* host = nullptr;
  for (size_t mi : comp)
    for (const Entry& e : matches[mi].slots) {
      if (!e.c->upload_start_ns) return false;
      const std::string& h = m.ranks[e.rank].host;
      if (host && *host != h) return false;
      host = &h;
    }
  return true;
}

constexpr size_t kPrefetchAhead = 8;

Exchange make_exchange(const RunModel& m, const std::vector<Match>& matches, const std::vector<size_t>& comp,
                       bool host_timed) {
  Exchange ex;
  const Match& first = matches[comp.front()];
  ex.comm = first.comm;
  ex.nranks = first.nranks;
  ex.ops = comp.size();
  ex.host_timed = host_timed;
  ex.p2p = ex.symmetric = true;
  if (comp.size() == 1 && !first.p2p) {  // a lone collective (the common case): its slots are its members
    ex.p2p = false;
    ex.symmetric = first.slots[0].c->func != StringTable::kNone && symmetric_collective(m.strings.at(first.slots[0].c->func));
    ex.func = first.slots[0].c->func;
    ex.seq = first.slots[0].c->seq;
    ex.members.reserve(first.slots.size());
    const size_t n = first.slots.size();
    for (size_t i = 0; i < n; ++i) {
      // Each slot is another rank's operation, far from the last: asked for a few slots ahead.
      if (i + kPrefetchAhead < n) __builtin_prefetch(first.slots[i + kPrefetchAhead].c);
      const Entry& e = first.slots[i];
      const Collective& c = *e.c;
      ex.bytes = std::max(ex.bytes, c.bytes);
      ex.members.push_back({e.rank, e.unit, c.comm_rank, host_timed ? c.upload_start_ns : c.gpu_start_ns,
                            host_timed ? std::max(c.upload_start_ns, c.upload_end_ns) : c.gpu_end_ns});
    }
    return ex;
  }
  std::map<int, ExchangeMember> by_comm_rank;
  std::tuple<uint32_t, uint64_t> lowest{StringTable::kNone, UINT64_MAX};
  for (size_t mi : comp) {
    const Match& mt = matches[mi];
    ex.p2p &= mt.p2p;
    for (const Entry& e : mt.slots) {
      const Collective& c = *e.c;
      ex.symmetric &= !c.p2p && c.func != StringTable::kNone && symmetric_collective(m.strings.at(c.func));
      ex.bytes = std::max(ex.bytes, c.bytes);
      lowest = std::min(lowest, std::make_tuple(c.func, c.seq));
      const int64_t start = host_timed ? c.upload_start_ns : c.gpu_start_ns;
      const int64_t end = host_timed ? std::max(c.upload_start_ns, c.upload_end_ns) : c.gpu_end_ns;
      auto [it, added] = by_comm_rank.emplace(c.comm_rank, ExchangeMember{e.rank, e.unit, c.comm_rank, start, end});
      if (!added) {
        it->second.start = std::min(it->second.start, start);
        it->second.end = std::max(it->second.end, end);
      }
    }
  }
  std::tie(ex.func, ex.seq) = lowest;
  for (auto& [cr, member] : by_comm_rank) ex.members.push_back(member);
  return ex;
}

CommMatches& comm_entry(const RunModel& m, Exchanges& x, const Match& mt) {
  CommMatches& cm = x.comms[mt.comm];
  // Once every communicator rank is known no slot changes anything: the slots of the other
  // operations need not be read (each is another rank's operation: a cache miss).
  if (!cm.ranks.empty() && cm.ranks_known == cm.ranks.size()) return cm;
  for (const Entry& e : mt.slots) {
    if (!e.c) continue;
    if (cm.ranks.empty()) {
      cm.nranks = e.c->comm_nranks;
      cm.name = e.c->comm_name;
      cm.ranks.assign(std::max(0, cm.nranks), -1);
    }
    const int cr = e.c->comm_rank;
    if (cr >= 0 && cr < static_cast<int>(cm.ranks.size()) && cm.ranks[cr] < 0) {
      cm.ranks[cr] = m.ranks[e.rank].rank;
      cm.ranks_known += cm.ranks[cr] >= 0;  // a rank file without its rank number leaves it unknown
    }
  }
  return cm;
}

}  // namespace

bool symmetric_collective(const std::string& func) {
  return func == "AllReduce" || func == "AllGather" || func == "ReduceScatter";
}

Exchanges build_exchanges(const RunModel& m) {
  Exchanges x;
  Matcher matcher(m, x);
  matcher.add_all();
  std::vector<Match>& matches = matcher.matches();
  for (Match& mt : matches) judge(mt);
  for (const std::vector<size_t>& comp : components(matches, matcher.plan_links())) {
    bool complete = true, shifted_only = true;
    for (size_t mi : comp) {
      complete &= matches[mi].state == Match::kComplete;
      shifted_only &= matches[mi].state != Match::kIncomplete;
    }
    const bool host_timed = !complete && shifted_only && host_timeable(m, matches, comp);
    const bool used = complete || host_timed;
    for (size_t mi : comp) {
      const Match& mt = matches[mi];
      CommMatches& cm = comm_entry(m, x, mt);
      if (mt.p2p) {
        cm.p2p_pairs += used;
        continue;
      }
      if (used) {
        ++cm.matched;
        continue;
      }
      ++cm.incomplete;
      cm.suspect += mt.suspect;
      cm.shifted += mt.state == Match::kShifted;
    }
    if (!used) continue;
    x.list.push_back(make_exchange(m, matches, comp, host_timed));
    x.comms[x.list.back().comm].host_timed += host_timed;
  }
  std::sort(x.list.begin(), x.list.end(), [](const Exchange& a, const Exchange& b) {
    return std::tie(a.comm, a.func, a.seq) < std::tie(b.comm, b.func, b.seq);
  });
  return x;
}

}  // namespace laggard::report
