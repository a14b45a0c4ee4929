#include "reader_nccl.h"

#include "nccl_gpu_checks.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

#include <fmt/format.h>

#include "reader_values.h"

namespace laggard::report {
namespace {

using nlohmann::json;

const json& column(const json& ops, const char* key, size_t n) {
  auto it = ops.find(key);
  if (it == ops.end() || !it->is_array() || it->size() != n)
    throw std::runtime_error(fmt::format("nccl.ops.{} is missing or not {} entries long", key, n));
  return *it;
}

uint32_t string_at(const std::vector<uint32_t>& ids, const json& v) {
  if (!v.is_number_integer()) return StringTable::kNone;
  int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? -1 : v.get<int64_t>();
  return i >= 0 && static_cast<size_t>(i) < ids.size() ? ids[i] : StringTable::kNone;
}

// A communicator as the window's "comms" list describes it; ops and p2p refer to it by index.
struct Comm {
  uint32_t id, name;
  int nranks, rank, nnodes, device;
};

std::vector<Comm> read_comms(const json& nccl, StringTable& strings) {
  std::vector<Comm> comms;
  for (const json& c : nccl.value("comms", json::array())) {
    std::string name = c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "";
    // Bounded: the comm analysis sizes per-communicator tables by nranks.
    auto field = [&](const char* key, int64_t lo, int64_t hi, int64_t fallback) {
      auto f = c.find(key);
      return static_cast<int>(f == c.end() || f->is_null() ? fallback : values::integer(*f, lo, hi, key));
    };
    const int nranks = field("nranks", 0, values::kMaxWorldSize, 0);
    comms.push_back({strings.intern(c.at("id").get<std::string>()),
                     name.empty() ? StringTable::kNone : strings.intern(name), nranks,
                     field("rank", -1, std::max(0, nranks - 1), -1), field("nnodes", 0, values::kMaxWorldSize, 0),
                     field("device", -1, 1 << 16, -1)});
  }
  return comms;
}

void read_drops_and_plugin(const json& nccl, CaptureWindow& w) {
  const json dropped = nccl.value("dropped", json::object());
  for (const auto& [key, value] : dropped.items())
    w.dropped["nccl_" + key] += values::count(value, "nccl.dropped");
  if (auto pl = nccl.find("plugin"); pl != nccl.end() && pl->is_object()) {
    auto table = pl->find("table");
    w.nccl_table = table == pl->end() ? 0 : static_cast<int>(values::integer(*table, INT_MIN, INT_MAX, "nccl.plugin.table"));
    w.nccl_kernel_events = pl->value("kernel_events", std::string());
    if (auto d = pl->find("displaced"); d != pl->end() && d->is_string()) w.nccl_displaced = d->get<std::string>();
  }
}

void read_p2p(const json& nccl, const std::vector<Comm>& comms, CaptureWindow& w) {
  for (const json& p : nccl.value("p2p", json::array())) {
    const auto c = static_cast<size_t>(values::integer(p.at("comm"), 0, INT32_MAX, "nccl.p2p.comm"));
    if (c >= comms.size()) throw std::runtime_error("nccl.p2p names no communicator");
    CaptureWindow::P2pCounts pc;
    pc.comm = comms[c].id;
    pc.comm_nranks = comms[c].nranks;
    pc.comm_rank = comms[c].rank;
    pc.sends = values::unsigned_or_zero(p, "sends", "nccl.p2p.sends");
    pc.recvs = values::unsigned_or_zero(p, "recvs", "nccl.p2p.recvs");
    pc.send_bytes = values::unsigned_or_zero(p, "send_bytes", "nccl.p2p.send_bytes");
    pc.recv_bytes = values::unsigned_or_zero(p, "recv_bytes", "nccl.p2p.recv_bytes");
    w.p2p.push_back(pc);
  }
}

// The "ops" columns (docs/schema.md, version 3), each checked to hold one entry per operation.
class OpColumns {
 public:
  explicit OpColumns(const json& ops)
      : n_(ops.value("comm", json::array()).size()),
        comm_(column(ops, "comm", n_)),
        p2p_(column(ops, "p2p", n_)),
        func_(column(ops, "func", n_)),
        seq_(column(ops, "seq", n_)),
        count_(column(ops, "count", n_)),
        bytes_(column(ops, "bytes", n_)),
        datatype_(column(ops, "datatype", n_)),
        root_(column(ops, "root", n_)),
        peer_(column(ops, "peer", n_)),
        algo_(column(ops, "algo", n_)),
        proto_(column(ops, "proto", n_)),
        nchannels_(column(ops, "nchannels", n_)),
        host_start_(column(ops, "host_start_offset_ns", n_)),
        host_dur_(column(ops, "host_dur_ns", n_)),
        gpu_start_(column(ops, "gpu_start_offset_ns", n_)),
        gpu_dur_(column(ops, "gpu_dur_ns", n_)),
        // Optional (channels: version 3 writers wrote it, earlier readers ignored it;
        // chan_host_*: version 4).
        channels_(optional_column(ops, "channels")),
        chan_start_(optional_column(ops, "chan_host_start_offset_ns")),
        chan_stop_(optional_column(ops, "chan_host_stop_offset_ns")),
        // Optional (issue 27).
        group_(optional_column(ops, "group")),
        shifted_(optional_column(ops, "gpu_shifted")) {}

  size_t size() const { return n_; }

  Collective op(size_t i, const std::vector<Comm>& comms, const std::vector<uint32_t>& ids, int64_t window_start) const {
    size_t c = static_cast<size_t>(values::integer(comm_[i], 0, INT32_MAX, "nccl.ops.comm"));
    if (c >= comms.size()) throw std::runtime_error(fmt::format("nccl.ops.comm[{}] names no communicator", i));
    Collective op;
    op.comm = comms[c].id;
    op.comm_name = comms[c].name;
    op.comm_nranks = comms[c].nranks;
    op.comm_rank = comms[c].rank;
    op.comm_nnodes = comms[c].nnodes;
    op.device = comms[c].device;
    op.func = string_at(ids, func_[i]);
    op.p2p = values::integer(p2p_[i], 0, 1, "nccl.ops.p2p") != 0;
    op.peer = static_cast<int>(values::integer(peer_[i], -1, values::kMaxWorldSize, "nccl.ops.peer"));
    op.root = static_cast<int>(values::integer(root_[i], -1, values::kMaxWorldSize, "nccl.ops.root"));
    op.seq = values::count(seq_[i], "nccl.ops.seq");
    op.count = values::count(count_[i], "nccl.ops.count");
    op.bytes = values::count(bytes_[i], "nccl.ops.bytes");
    op.datatype = string_at(ids, datatype_[i]);
    op.algo = string_at(ids, algo_[i]);
    op.proto = string_at(ids, proto_[i]);
    op.nchannels = static_cast<int>(values::integer(nchannels_[i], 0, 1 << 16, "nccl.ops.nchannels"));
    if (channels_ && (*channels_)[i].is_number_integer())
      op.channels = static_cast<int>(values::integer((*channels_)[i], 0, 1 << 16, "nccl.ops.channels"));
    if (group_ && (*group_)[i].is_number_integer()) op.group = values::count((*group_)[i], "nccl.ops.group");
    if (shifted_ && (*shifted_)[i].is_number_integer())
      op.gpu_shifted = values::integer((*shifted_)[i], 0, 1, "nccl.ops.gpu_shifted") != 0;
    read_times(i, window_start, op);
    return op;
  }

 private:
  const json* optional_column(const json& ops, const char* key) const {
    return ops.contains(key) ? &column(ops, key, n_) : nullptr;
  }

  int64_t chan_offset_at(const json* col, size_t i, int64_t window_start) const {
    return col && (*col)[i].is_number_integer()
               ? window_start + values::offset_ns((*col)[i], "nccl.ops.chan_host_offset_ns")
               : 0;
  }

  void read_times(size_t i, int64_t window_start, Collective& op) const {
    op.upload_start_ns = window_start + values::offset_ns(host_start_[i], "nccl.ops.host_start_offset_ns");
    if (op.upload_start_ns <= 0) throw std::runtime_error("NCCL operation before 1970");
    op.upload_end_ns =
        host_dur_[i].is_null() ? 0 : op.upload_start_ns + values::dur_ns(host_dur_[i], "nccl.ops.host_dur_ns");
    op.chan_host_start_ns = chan_offset_at(chan_start_, i, window_start);
    op.chan_host_stop_ns = chan_offset_at(chan_stop_, i, window_start);
    if (gpu_start_[i].is_null() || gpu_dur_[i].is_null()) return;
    // NCCL's GPU clock may not be epoch-based (finish_nccl_rank shifts it): any sign here.
    op.gpu_start_ns = window_start + values::integer(gpu_start_[i], -values::kMaxTimeNs, values::kMaxTimeNs,
                                                     "nccl.ops.gpu_start_offset_ns");
    if (op.gpu_start_ns < 0 || op.gpu_start_ns > values::kMaxTimeNs)
      throw std::runtime_error("nccl.ops.gpu_start_offset_ns: GPU time outside 0..2096");
    op.gpu_end_ns = op.gpu_start_ns + values::dur_ns(gpu_dur_[i], "nccl.ops.gpu_dur_ns");
  }

  size_t n_;
  const json &comm_, &p2p_, &func_, &seq_, &count_, &bytes_, &datatype_, &root_, &peer_, &algo_, &proto_,
      &nchannels_, &host_start_, &host_dur_, &gpu_start_, &gpu_dur_;
  const json *channels_, *chan_start_, *chan_stop_, *group_, *shifted_;
};

}  // namespace

void read_nccl_window(const json& nccl, StringTable& strings, CaptureWindow& w) {
  const std::vector<Comm> comms = read_comms(nccl, strings);
  std::vector<uint32_t> ids;
  for (const json& s : nccl.value("strings", json::array())) ids.push_back(strings.intern(s.get<std::string>()));
  read_drops_and_plugin(nccl, w);
  read_p2p(nccl, comms, w);

  auto it = nccl.find("ops");
  if (it == nccl.end()) return;
  const OpColumns ops(*it);
  w.collectives.reserve(w.collectives.size() + ops.size());
  for (size_t i = 0; i < ops.size(); ++i) w.collectives.push_back(ops.op(i, comms, ids, w.start_ns));
}

void finish_nccl_rank(RankData& r, std::vector<Problem>& problems) {
  shift_far_gpu_clock(r, problems);
  flag_implausible_gpu_times(r, problems);
  check_nccl_plugin(r, problems);
  bool kernel_events_off = false;
  for (const CaptureWindow& w : r.windows) kernel_events_off |= w.nccl_kernel_events.rfind("off", 0) == 0;

  uint64_t lost = 0, no_gpu = 0;
  for (const CaptureWindow& w : r.windows)
    for (const auto& [k, v] : w.dropped) {
      if (k == "nccl_pool_full" || k == "nccl_window_full" || k == "nccl_comms_overflow") lost += v;
      if (k == "nccl_no_gpu_time") no_gpu += v;
    }
  if (lost)
    problems.push_back({"nccl_dropped", r.rank, "",
                        fmt::format("rank {} did not record {} NCCL operations (capture buffers full; see the "
                                    "nccl_* dropped counts)", r.rank, lost)});
  if (no_gpu && !kernel_events_off)
    problems.push_back({"nccl_no_gpu_time", r.rank, "",
                        fmt::format("rank {}: {} NCCL operations have no GPU times (NCCL sent no kernel channel "
                                    "events for them); they are left out of the arrival analysis", r.rank, no_gpu)});
}

}  // namespace laggard::report
