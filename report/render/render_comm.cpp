#include "render_comm.h"

#include <algorithm>

#include <map>

#include <fmt/format.h>

#include "text_lists.h"
#include "units.h"

namespace laggard::report {
namespace {

using nlohmann::json;

std::string bytes_str(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", double(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(b) / (1ull << 10));
  return fmt::format("{} B", b);
}

// Rank lists as ranges ("0-511,513-959"), bounded in length at any job size.
std::string join(const std::vector<int>& v) { return rank_ranges(v); }

std::string comm_name(const RunModel& m, const CommSummary& c) {
  return c.name != StringTable::kNone ? m.strings.at(c.name) : std::string("(unnamed)");
}

}  // namespace

namespace {

// What NCCL did with the plugin (ranks grouped by it) and communicators with unseen sequence numbers.
void render_plugin_and_gaps(const RunModel& m, const CommReport& rep, std::ostream& out, size_t top) {
  std::map<std::string, std::vector<int>> by_plugin;
  for (const CommRankStats& r : rep.ranks) by_plugin[r.nccl_plugin].push_back(r.rank);
  for (const auto& [status, ranks] : by_plugin)
    out << fmt::format("  Plugin: {} ({})\n", status, counted_ranks(ranks));
  std::vector<const CommSummary*> gaps;
  for (const CommSummary& c : rep.comms)
    if (c.seq_gaps) gaps.push_back(&c);
  const size_t gaps_shown = rows_shown(gaps.size(), top);
  for (size_t i = 0; i < gaps_shown; ++i)
    out << fmt::format("  comm {}: {} sequence numbers never seen (collectives the plugin cannot see, or dropped)\n",
                       comm_name(m, *gaps[i]), gaps[i]->seq_gaps);
  out << more_line(gaps.size(), gaps_shown, "communicators with unseen sequence numbers");
}

// The fitted GPU clock offsets, the largest first when not all are shown.
void render_clock_fit(const CommReport& rep, std::ostream& out, size_t top) {
  out << fmt::format("  Clocks: each GPU's offset and drift fitted to the collectives' end times (rank {} is the "
                     "reference); offsets up to {:.3f} ms, drift up to {:.2f} ppm, residual {:.3f} ms\n",
                     rep.clock.reference_rank, ms(rep.clock.max_abs_offset_ns), rep.clock.max_abs_drift_ppm,
                     ms(rep.clock.residual_ns));
  std::vector<const CommRankStats*> corrected;
  for (const CommRankStats& r : rep.ranks)
    if (r.clock_samples && (std::abs(r.clock_offset_ns) >= 1000 || std::abs(r.clock_drift_ppm) >= 0.1))
      corrected.push_back(&r);
  const size_t corrected_shown = rows_shown(corrected.size(), top);
  if (corrected_shown < corrected.size())
    std::stable_sort(corrected.begin(), corrected.end(), [](auto* a, auto* b) {
      return std::abs(a->clock_offset_ns) > std::abs(b->clock_offset_ns);
    });
  std::string per_rank;
  for (size_t i = 0; i < corrected_shown; ++i)
    per_rank += fmt::format(" {}:{:+.3f}ms/{:+.2f}ppm", corrected[i]->rank, ms(corrected[i]->clock_offset_ns),
                            corrected[i]->clock_drift_ppm);
  if (corrected_shown < corrected.size())
    per_rank += fmt::format(" ... {} more (the largest offsets shown)", corrected.size() - corrected_shown);
  if (!per_rank.empty()) out << "    corrected ranks (rank:offset/drift):" << per_rank << "\n";
  if (!rep.clock.callback_corrected.empty())
    out << fmt::format("    offsets taken from the host callbacks of GPUs on one host, not from the end times (the "
                       "fit read late-ending collectives as a clock offset): ranks {}\n",
                       join(rep.clock.callback_corrected));
  std::vector<const CommRankStats*> late;
  for (const CommRankStats& r : rep.ranks)
    if (r.late_end_ns >= rep.options.lead_floor_ns) late.push_back(&r);
  const size_t late_shown = rows_shown(late.size(), top);
  std::string late_text;
  for (size_t i = 0; i < late_shown; ++i)
    late_text += fmt::format(" {}:{:+.3f}ms", late[i]->rank, ms(late[i]->late_end_ns));
  if (late_shown < late.size()) late_text += fmt::format(" ... {} more", late.size() - late_shown);
  if (!late_text.empty())
    out << "    collectives end later than on the other ranks (a slow GPU; rank:median):" << late_text << "\n";
}

// Per rank: collectives, last arrivals, blame and waits; the most blamed first when cut to `top`.
void render_rank_table(const CommReport& rep, std::ostream& out, size_t top) {
  std::vector<const CommRankStats*> rows;
  for (const CommRankStats& r : rep.ranks) rows.push_back(&r);
  const size_t rows_kept = rows_shown(rows.size(), top);
  if (rows_kept < rows.size()) {
    std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->blame_ns > b->blame_ns; });
    rows.resize(rows_kept);
  }
  out << fmt::format("  {:>5}  {:<16} {:>7} {:>6} {:>6} {:>11} {:>11} {:>11}\n", "RANK", "HOST", "COLLS", "LAST",
                     "LAST%", "BLAME ms", "WAITED ms", "KERNEL ms");
  for (const CommRankStats* r : rows)
    out << fmt::format("  {:>5}  {:<16} {:>7} {:>6} {:>6.1f} {:>11.3f} {:>11.3f} {:>11.3f}\n", r->rank, r->host,
                       r->collectives, r->last, r->collectives ? 100.0 * r->last / r->collectives : 0.0,
                       ms(r->blame_ns), ms(r->waited_ns), ms(r->kernel_ns));
  if (rep.ranks.size() > rows.size())
    out << fmt::format("  ... {} more ranks (the {} with the most blame are shown; --top shows more; all are in "
                       "--format json or csv)\n",
                       rep.ranks.size() - rows.size(), rows.size());
}

void render_longest_waits(const RunModel& m, const CommReport& rep, std::ostream& out) {
  if (!rep.worst.empty()) out << "  Longest waits:\n";
  for (size_t k = 0; k < std::min<size_t>(3, rep.worst.size()); ++k) {
    const CollectiveDetail& d = rep.worst[k];
    out << fmt::format("    {} seq {} ({}): {:.3f} ms waited in total; last: {}\n", m.strings.at(d.func), d.seq,
                       m.strings.at(d.comm), ms(d.total_wait_ns), d.last_ranks.empty() ? "-" : join(d.last_ranks));
  }
}

const CommSummary::PerRank* most_often_last(const CommSummary& c) {
  const CommSummary::PerRank* most = nullptr;
  for (const auto& pr : c.per_rank)
    if (!most || pr.last > most->last) most = &pr;
  return most;
}

// Every communicator in small jobs; in large ones (a tensor-parallel group per node) the `top`
// with a slow collective or the largest last-arrival share first.
std::vector<const CommSummary*> communicators_shown(const CommReport& rep, size_t top) {
  std::vector<const CommSummary*> comms;
  for (const CommSummary& c : rep.comms) comms.push_back(&c);
  const size_t comms_shown = rows_shown(comms.size(), top);
  if (comms_shown < comms.size()) {
    auto key = [&](const CommSummary* c) {
      const auto* most = most_often_last(*c);
      return std::make_pair(c->slow_count > 0, most ? most->last_share - c->last_share_threshold : -1.0);
    };
    std::stable_sort(comms.begin(), comms.end(), [&](auto* a, auto* b) { return key(a) > key(b); });
    comms.resize(comms_shown);
  }
  return comms;
}

void render_communicator(const RunModel& m, const CommSummary& c, const CommOptions& o, std::ostream& out,
                         size_t top) {
  out << fmt::format("  comm {} ({}, {} ranks: {}): {} collectives", comm_name(m, c), m.strings.at(c.comm),
                     c.nranks, join(c.ranks), c.collectives);  // members as ranges: 10,000 stay one line
  if (c.p2p_pairs) out << fmt::format(", {} send/recv pairs", c.p2p_pairs);
  if (c.arrivals != c.collectives + c.p2p_pairs) out << fmt::format(" in {} arrivals (groups run in one kernel)", c.arrivals);
  const CommSummary::PerRank* most = most_often_last(c);
  if (most && most->last)
    out << fmt::format("; last most often: rank {} ({:.1f}%, threshold {:.1f}%)", most->rank, 100 * most->last_share,
                       100 * most->last_share_threshold);
  out << '\n';
  if (c.host_timed)
    out << fmt::format("    {} arrivals timed by the ranks' enqueue (host clock): NCCL's GPU times on this communicator "
                       "belong to other work after a Broadcast from several roots (NVIDIA/nccl#2368)\n",
                       c.host_timed);
  if (c.shifted)
    out << fmt::format("    {} collectives without usable arrivals: NCCL's GPU times here belong to other work "
                       "(NVIDIA/nccl#2368) and the ranks' host clocks are not one clock\n",
                       c.shifted);
  if (!c.slow_count) return;
  out << fmt::format("    slow collectives (bus bandwidth below {:.2f}x the job's median for the same function and "
                     "size): {}\n", o.slow_factor, c.slow_count);
  const size_t slow_shown = rows_shown(c.slow.size(), top);
  for (size_t i = 0; i < slow_shown; ++i) {
    const SlowCollective& s = c.slow[i];
    out << fmt::format("      {:<14} seq {:<8} {:>10}  busbw {:8.2f} GB/s (median {:.2f})  transfer {:.3f} ms  "
                       "last: {}\n",
                       m.strings.at(s.func), s.seq, bytes_str(s.bytes), s.busbw_gbps, s.median_busbw_gbps,
                       ms(s.transfer_ns), s.last_ranks.empty() ? std::string("-") : join(s.last_ranks));
  }
  if (slow_shown < c.slow.size()) out << "  " << more_line(c.slow.size(), slow_shown, "slow collectives");
}

}  // namespace

void render_comm_text(const RunModel& run, const CommReport& rep, std::ostream& out, size_t top) {
  if (!rep.ops) return;
  const RunModel& m = comm_strings(run, rep);
  const CommOptions& o = rep.options;
  const bool host = rep.source == "host";  // issue 25: host-timed collectives (NVTX <op>@<group>)
  if (host)
    out << fmt::format("\nCollectives timed on the host (NVTX ranges <op>@<group>): {} matched on every rank of {} "
                       "group(s); {} seen on some ranks only or in windows whose calls were sampled\n",
                       rep.matched, rep.comms.size(), rep.incomplete);
  else
    out << fmt::format("\nNCCL collectives: {} matched on every rank of {} communicator(s); {} seen on some ranks "
                       "only or without GPU times ({} of them left out for suspect GPU times); {} p2p operations "
                       "({} send/recv pairs matched)\n",
                       rep.matched, rep.comms.size(), rep.incomplete, rep.suspect, rep.p2p, rep.p2p_pairs);
  if (!host) render_plugin_and_gaps(m, rep, out, top);
  if (!rep.arrivals) return;
  if (rep.clock.corrected) render_clock_fit(rep, out, top);
  out << fmt::format("  A rank arrived last when its {} the collective within {:.3f} ms of the latest rank,\n"
                     "  and that was at least {:.3f} ms after the earliest. WAITED: time spent waiting for others;\n"
                     "  BLAME: the time the others waited for it.{}\n",
                     host ? "host called" : "GPU reached", ms(o.lead_floor_ns), ms(o.lead_floor_ns),
                     host ? " KERNEL: the calls' own host time." : "");
  render_rank_table(rep, out, top);
  render_longest_waits(m, rep, out);
  out << fmt::format("  Persistently last (a straggler of scope comm): last in >= {} of >= {} arrivals at a\n"
                     "  communicator, and in a share >= (1 + 1/n)/2 (n: ranks meeting there; 2 for send/recv),\n"
                     "  halfway between chance and always. A rank late because it waited just before passes\n"
                     "  the blame on to whom it waited for.\n",
                     o.min_last, o.min_collectives);
  for (const CommSummary* c : communicators_shown(rep, top)) render_communicator(m, *c, o, out, top);
  out << more_line(rep.comms.size(), rows_shown(rep.comms.size(), top), "communicators");
}

namespace {

json criteria_json(const CommOptions& o) {
  return {{"lead_floor_ms", ms(o.lead_floor_ns)},
          {"host_lead_floor_ms", ms(o.host_lead_floor_ns)},
          {"min_collectives", o.min_collectives},
          {"min_last", o.min_last},
          {"last_share_threshold", "(1 + 1/n) / 2 for n ranks meeting (a send/recv pair: 2), averaged over a rank's arrivals"},
          {"exchange", "a collective, a group of operations NCCL ran in one kernel, or a send/recv pair: one arrival per rank"},
          {"passed_on", "a last rank that waited in its previous exchange passes that much of the blame to whom it waited for"},
          {"slow_factor", o.slow_factor},
          {"slow_min_samples", o.slow_min_samples},
          {"wait", "last arrival - own arrival (GPU start), at most the own kernel time"},
          {"blame", "waits of the others, split among the ranks that arrived last"},
          {"transfer", "latest end - last arrival; algbw = size / transfer, busbw = algbw x nccl-tests factor"}};
}

json clock_json(const CommReport::Clock& clock) {
  json hosts = json::array();
  for (const auto& h : clock.hosts)
    hosts.push_back({{"host", h.host}, {"offset_ms", ms(h.offset_ns)}, {"rank_spread_ms", ms(h.spread_ns)},
                     {"ranks", h.ranks}});
  return {{"method", "per-rank (per-GPU) offset and drift fitted to the end times of symmetric collectives"},
          {"corrected", clock.corrected},
          {"reference_rank", clock.reference_rank >= 0 ? json(clock.reference_rank) : json(nullptr)},
          {"reference_time_ns", clock.reference_time_ns},
          {"samples", clock.samples},
          {"max_abs_offset_ms", ms(clock.max_abs_offset_ns)},
          {"max_abs_drift_ppm", clock.max_abs_drift_ppm},
          {"residual_ms", ms(clock.residual_ns)},
          {"callback_corrected", clock.callback_corrected},
          {"hosts", hosts}};
}

// Keys sorted, as nlohmann's std::map gives them (the writer checks).
void write_comm_rank(JsonWriter& w, const CommRankStats& r) {
  w.begin_object();
  w.field("blame_ms", ms(r.blame_ns))
      .field("clock_drift_ppm", r.clock_drift_ppm)
      .field("clock_offset_ms", ms(r.clock_offset_ns))
      .field("clock_residual_ms", ms(r.clock_residual_ns))
      .field("clock_samples", r.clock_samples)
      .field("clock_source", r.clock_source)
      .field("collectives", r.collectives);
  w.key("gpu_clocks").begin_array();
  for (const CommRankStats::GpuClock& g : r.gpu_clocks) {
    w.begin_object();
    w.field("clock_drift_ppm", g.drift_ppm)
        .field("clock_offset_ms", ms(g.offset_ns))
        .field("clock_samples", g.samples)
        .field("device", g.device);
    w.end_object();
  }
  w.end_array();
  w.field("gpu_shift_ms", ms(double(r.gpu_shift_ns)))
      .field("host", r.host)
      .field("kernel_ms", ms(r.kernel_ns))
      .field("last_count", r.last)
      .field("last_share", r.collectives ? double(r.last) / r.collectives : 0.0)
      .field("late_end_ms", ms(r.late_end_ns))
      .field("nccl_plugin", r.nccl_plugin)
      .field("p2p_bytes", r.p2p_bytes)
      .field("p2p_gpu_ms", ms(r.p2p_gpu_ns))
      .field("p2p_ops", r.p2p_ops)
      .field("rank", r.rank)
      .field("suspect", r.suspect)
      .field("waited_ms", ms(r.waited_ns));
  w.end_object();
}

void write_comm_member(JsonWriter& w, const CommSummary::PerRank& pr) {
  w.begin_object();
  w.field("arrivals", pr.arrivals)
      .field("blame_ms", ms(pr.blame_ns))
      .field("last_count", pr.last)
      .field("last_share", pr.last_share)
      .field("last_share_threshold", pr.last_share_threshold)
      .field("rank", pr.rank)
      .field("waited_ms", ms(pr.waited_ns));
  w.end_object();
}

void write_slow_collective(JsonWriter& w, const RunModel& m, const SlowCollective& s) {
  w.begin_object();
  w.field("algbw_gbps", s.algbw_gbps)
      .field("busbw_gbps", s.busbw_gbps)
      .field("bytes", s.bytes)
      .field("func", m.strings.at(s.func))
      .field("last_arrival_ns", s.last_arrival_ns)
      .field("last_ranks", s.last_ranks)
      .field("median_busbw_gbps", s.median_busbw_gbps)
      .field("seq", s.seq)
      .field("transfer_ms", ms(s.transfer_ns));
  w.end_object();
}

void write_communicator(JsonWriter& w, const RunModel& m, const CommSummary& c) {
  w.begin_object();
  w.field("arrivals", c.arrivals)
      .field("collectives", c.collectives)
      .field("host_timed", c.host_timed)
      .field("id", m.strings.at(c.comm))
      .field("incomplete", c.incomplete)
      .field("last_share_threshold", c.last_share_threshold);
  w.key("name");
  if (c.name != StringTable::kNone)
    w.value(m.strings.at(c.name));
  else
    w.null();
  w.field("nranks", c.nranks).field("p2p_pairs", c.p2p_pairs);
  w.key("per_rank").parallel_array(c.per_rank.size(), [&](size_t i, JsonWriter& e) { write_comm_member(e, c.per_rank[i]); });
  w.field("ranks", c.ranks).field("seq_gaps", c.seq_gaps).field("shifted", c.shifted);
  w.key("slow").parallel_array(c.slow.size(), [&](size_t i, JsonWriter& e) { write_slow_collective(e, m, c.slow[i]); });
  w.field("slow_count", c.slow_count).field("suspect", c.suspect);
  w.end_object();
}

// A worst wait's arrivals and waits hold every member: 200,000 numbers at 10,000 ranks.
void write_ms_array(JsonWriter& w, const std::vector<double>& ns) {
  w.parallel_array(ns.size(), [&](size_t i, JsonWriter& e) { e.value(ms(ns[i])); });
}

void write_worst_wait(JsonWriter& w, const RunModel& m, const CollectiveDetail& d) {
  w.begin_object();
  w.field("algbw_gbps", d.algbw_gbps);
  write_ms_array(w.key("arrival_ms"), d.arrival_ns);
  w.field("blamed_ranks", d.blamed_ranks)
      .field("busbw_gbps", d.busbw_gbps)
      .field("bytes", d.bytes)
      .field("comm", m.strings.at(d.comm))
      .field("first_arrival_ns", d.first_arrival_ns)
      .field("func", m.strings.at(d.func))
      .field("host_timed", d.host_timed)
      .field("last_ranks", d.last_ranks)
      .field("ops", d.ops)
      .field("p2p", d.p2p)
      .field("ranks", d.ranks)
      .field("seq", d.seq)
      .field("total_wait_ms", ms(d.total_wait_ns))
      .field("transfer_ms", ms(d.transfer_ns));
  write_ms_array(w.key("wait_ms"), d.wait_ns);
  w.end_object();
}

}  // namespace

void write_comm_json(JsonWriter& w, const RunModel& run, const CommReport& rep) {
  const RunModel& m = comm_strings(run, rep);
  JsonObjectParts j;
  j.add("source", rep.source);  // "nccl", or "host": collectives timed on the host (issue 25)
  j.add("ops", rep.ops);
  j.add("collectives", rep.matched);
  j.add("incomplete", rep.incomplete);
  j.add("p2p", rep.p2p);
  j.add("suspect", rep.suspect);
  j.add("shifted", rep.shifted);
  j.add("arrivals", rep.arrivals);
  j.add("p2p_pairs", rep.p2p_pairs);
  j.add("host_timed", rep.host_timed);
  j.add("criteria", criteria_json(rep.options));
  j.add("clock", clock_json(rep.clock));  // per host: small
  j.add_written("ranks", [&](JsonWriter& a) {
    a.parallel_array(rep.ranks.size(), [&](size_t i, JsonWriter& e) { write_comm_rank(e, rep.ranks[i]); });
  });
  // Serially: one communicator may hold every rank, its members then written on every core.
  j.add_written("communicators", [&](JsonWriter& a) {
    a.begin_array();
    for (const CommSummary& c : rep.comms) write_communicator(a, m, c);
    a.end_array();
  });
  j.add_written("worst_waits", [&](JsonWriter& a) {
    a.begin_array();
    for (const CollectiveDetail& d : rep.worst) write_worst_wait(a, m, d);
    a.end_array();
  });
  j.write(w);
}

}  // namespace laggard::report
