#include "host_collectives.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace laggard::report {
namespace host_collectives_detail {  // named: unity batches share anonymous namespaces

// Normalized op (lower case, no '_', no "mpi" prefix) -> the function name NCCL's records use,
// so the analysis and its text treat both alike (AllReduce, AllGather and ReduceScatter are
// "symmetric" there).
const std::map<std::string, std::string>& known_ops() {
  static const std::map<std::string, std::string> ops = {
      {"allreduce", "AllReduce"},          {"allreducecoalesced", "AllReduce"},   {"reduce", "Reduce"},
      {"broadcast", "Broadcast"},          {"bcast", "Broadcast"},                {"allgather", "AllGather"},
      {"allgatherv", "AllGather"},         {"allgathercoalesced", "AllGather"},   {"allgatherbase", "AllGather"},
      {"allgatherintotensor", "AllGather"}, {"gather", "Gather"},                 {"gatherv", "Gather"},
      {"scatter", "Scatter"},              {"scatterv", "Scatter"},               {"reducescatter", "ReduceScatter"},
      {"reducescatterblock", "ReduceScatter"}, {"reducescatterbase", "ReduceScatter"},
      {"reducescattertensor", "ReduceScatter"}, {"alltoall", "AllToAll"},         {"alltoallv", "AllToAll"},
      {"alltoallsingle", "AllToAll"},      {"barrier", "Barrier"},                {"monitoredbarrier", "Barrier"}};
  return ops;
}

// "MPI_Iallreduce" -> "allreduce"; "" when the op is not a known collective.
std::string normalized_op(const std::string& op) {
  std::string n;
  for (char c : op)
    if (c != '_') n += char(std::tolower(static_cast<unsigned char>(c)));
  if (n.rfind("mpi", 0) == 0) n = n.substr(3);
  if (known_ops().count(n)) return n;
  if (n.size() > 1 && n[0] == 'i' && known_ops().count(n.substr(1))) return n.substr(1);  // MPI's non-blocking
  return "";
}

bool group_text(const std::string& g) {
  if (g.empty() || g.size() > 128) return false;
  return std::all_of(g.begin(), g.end(), [](char c) { return std::isgraph(static_cast<unsigned char>(c)); });
}

// One rank's calls on one group, in call order, from one window (or none: a sampled window).
struct Call {
  int64_t start_ns, end_ns;
  std::string func;
};

// Per group (with domain): this rank's calls with their index on the group.
using RankCalls = std::map<std::string, std::vector<std::pair<uint64_t, Call>>>;

RankCalls calls_of(const RankData& r) {
  RankCalls out;
  std::map<std::string, uint64_t> next_index;  // per group: calls counted so far
  for (const CaptureWindow& w : r.windows) {
    std::map<std::string, std::vector<Call>> in_window;
    std::map<std::string, bool> complete;  // every occurrence of the group's sections is stored
    std::map<std::string, uint64_t> counted;
    for (const SectionWindow& s : w.sections) {
      HostCollectiveName name;
      if (!parse_host_collective(s.name, &name)) continue;
      const std::string func = known_ops().at(normalized_op(name.op));
      auto [it, added] = complete.emplace(name.group, true);
      it->second = it->second && s.occurrences.size() == s.count;
      counted[name.group] += s.count;
      for (const Occurrence& o : s.occurrences) in_window[name.group].push_back({o.start_ns, o.start_ns + o.dur_ns, func});
    }
    for (auto& [group, n] : counted) {
      uint64_t& base = next_index[group];
      if (complete[group]) {
        std::vector<Call>& calls = in_window[group];
        std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.start_ns < b.start_ns; });
        for (size_t i = 0; i < calls.size(); ++i) out[group].push_back({base + i, calls[i]});
      }
      base += n;
    }
  }
  return out;
}

}  // namespace host_collectives_detail

namespace hc = host_collectives_detail;

bool parse_host_collective(const std::string& section, HostCollectiveName* out) {
  const size_t at = section.rfind('@');
  if (at == std::string::npos || at == 0) return false;
  const std::string left = section.substr(0, at), group = section.substr(at + 1);
  const size_t colon = left.rfind(':');
  const std::string op = colon == std::string::npos ? left : left.substr(colon + 1);
  if (!hc::group_text(group) || hc::normalized_op(op).empty()) return false;
  if (out) {
    out->op = op;
    out->group = colon == std::string::npos ? group : left.substr(0, colon) + ":" + group;
  }
  return true;
}

RunModel host_collective_model(const RunModel& model) {
  RunModel h;
  h.dir = model.dir;
  h.run_id = model.run_id;
  h.world_size = model.world_size;
  std::vector<hc::RankCalls> calls;
  std::map<std::string, std::vector<size_t>> members;  // group -> rank indices that call it
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    calls.push_back(hc::calls_of(model.ranks[ri]));
    for (const auto& [group, list] : calls.back()) members[group].push_back(ri);
  }
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& r = model.ranks[ri];
    RankData& hr = h.ranks.emplace_back();
    hr.rank = r.rank;
    hr.local_rank = r.local_rank;
    hr.world_size = r.world_size;
    hr.host = r.host;
    hr.pid = r.pid;
    hr.run_id = r.run_id;
    hr.final = r.final;
    CaptureWindow& w = hr.windows.emplace_back();  // one window: analyze_collectives needs no more
    if (!r.windows.empty()) {
      w.start_ns = r.windows.front().start_ns;
      w.end_ns = r.windows.back().end_ns;
    }
    for (const auto& [group, list] : calls[ri]) {
      const std::vector<size_t>& m = members[group];
      const int n = static_cast<int>(m.size());
      const int comm_rank = static_cast<int>(std::find(m.begin(), m.end(), ri) - m.begin());
      const uint32_t comm = h.strings.intern(group);
      for (const auto& [index, call] : list) {
        Collective c;
        c.comm = comm;
        c.comm_name = comm;
        c.comm_nranks = n;
        c.comm_rank = comm_rank;
        c.func = h.strings.intern(call.func);
        c.seq = index;
        c.gpu_start_ns = call.start_ns;
        c.gpu_end_ns = call.end_ns;
        w.collectives.push_back(c);
      }
    }
  }
  return h;
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> host_collective_waits(const RunModel& h, double lead_floor_ns) {
  struct Arrival {
    size_t rank;
    int64_t start, end;
  };
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::vector<Arrival>> groups;
  for (size_t ri = 0; ri < h.ranks.size(); ++ri)
    for (const CaptureWindow& w : h.ranks[ri].windows)
      for (const Collective& c : w.collectives)
        groups[{c.comm, c.func, c.seq}].push_back({ri, c.gpu_start_ns, c.gpu_end_ns});
  std::vector<std::vector<std::pair<int64_t, int64_t>>> waits(h.ranks.size());
  for (const auto& [key, arrivals] : groups) {
    int64_t last = INT64_MIN;
    for (const Arrival& a : arrivals) last = std::max(last, a.start);
    for (const Arrival& a : arrivals)
      if (double(last - a.start) >= lead_floor_ns) waits[a.rank].push_back({a.start, std::min(last, a.end)});
  }
  for (auto& w : waits) std::sort(w.begin(), w.end());
  return waits;
}

CommReport analyze_run_collectives(const RunModel& model, const ScoreReport& scores, const CommOptions& options) {
  CommReport nccl = analyze_collectives(model, scores, options);
  if (nccl.ops) return nccl;
  RunModel host = host_collective_model(model);
  bool any = false;
  for (const RankData& r : host.ranks) any |= !r.windows.empty() && !r.windows.front().collectives.empty();
  if (!any) return nccl;
  CommOptions o = options;
  o.fit_clocks = false;  // host clocks: one per host, no GPU clock to fit
  CommReport rep = analyze_collectives(host, scores, o);
  rep.source = "host";
  for (CommRankStats& r : rep.ranks) r.nccl_plugin = "none: collectives timed on the host";
  rep.host_waits = host_collective_waits(host, o.lead_floor_ns);
  rep.host_model = std::make_shared<const RunModel>(std::move(host));
  return rep;
}

}  // namespace laggard::report
