#include "nccl_json.h"

#include "name_table.h"

#include <cstdio>

namespace laggard {

NcclDrops& NcclDrops::operator+=(const NcclDrops& o) {
  pool_full += o.pool_full;
  window_full += o.window_full;
  comms_overflow += o.comms_overflow;
  no_context += o.no_context;
  orphan_kernel_ch += o.orphan_kernel_ch;
  stale_handle += o.stale_handle;
  no_gpu_time += o.no_gpu_time;
  missing_channels += o.missing_channels;
  bad_gpu_time += o.bad_gpu_time;
  unfinished_at_exit += o.unfinished_at_exit;
  shifted_kernel_ch += o.shifted_kernel_ch;
  return *this;
}

namespace {

// One column of the ops table.
template <class F>
void column(JsonOut& j, const char* key, const std::vector<NcclOp>& ops, F get) {
  j.key(key).begin_array();
  for (const NcclOp& op : ops) get(op);
  j.end_array();
}

void string_index(JsonOut& j, uint32_t id) {
  if (id == kNcclNoString) j.value(-1);
  else j.value(id);
}

}  // namespace

void render_nccl(JsonOut& j, const NcclWindow& w, int64_t t0) {
  j.key("nccl").begin_object();
  j.field("gpu_clock", "globaltimer");
  // Version 4: what NCCL actually did with the plugin.
  j.key("plugin").begin_object().field("table", w.table_version).field("inits", w.inits);
  j.field("kernel_events", w.kernel_events);
  if (!w.displaced.empty()) j.field("displaced", w.displaced);  // issue 27
  j.end_object();
  j.key("comms").begin_array();
  for (const NcclCommInfo& c : w.comms) {
    char id[24];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(c.hash));
    j.begin_object().field("id", id);
    j.key("name");
    if (c.name.empty()) j.null(); else j.value(sanitize_utf8(c.name));
    j.field("nranks", c.nranks).field("rank", c.rank).field("nnodes", c.nnodes);
    if (c.device >= 0) j.field("device", c.device);  // issue 27: one clock per GPU
    j.end_object();
  }
  j.end_array();
  // NCCL's strings (and the job's commName) are bytes as given: invalid UTF-8 would make the
  // whole file invalid JSON (found by tests/fuzz/fuzz_nccl).
  j.key("strings").begin_array();
  for (const std::string& s : w.strings) j.value(sanitize_utf8(s));
  j.end_array();

  const auto& ops = w.ops;
  j.key("ops").begin_object();
  column(j, "comm", ops, [&](const NcclOp& o) { j.value(o.comm); });
  column(j, "p2p", ops, [&](const NcclOp& o) { j.value(o.p2p ? 1 : 0); });
  column(j, "func", ops, [&](const NcclOp& o) { string_index(j, o.func); });
  column(j, "seq", ops, [&](const NcclOp& o) { j.value(o.seq); });
  column(j, "count", ops, [&](const NcclOp& o) { j.value(o.count); });
  column(j, "bytes", ops, [&](const NcclOp& o) { j.value(o.bytes); });
  column(j, "datatype", ops, [&](const NcclOp& o) { string_index(j, o.datatype); });
  column(j, "root", ops, [&](const NcclOp& o) { j.value(o.root); });
  column(j, "peer", ops, [&](const NcclOp& o) { j.value(o.peer); });
  column(j, "algo", ops, [&](const NcclOp& o) { string_index(j, o.algo); });
  column(j, "proto", ops, [&](const NcclOp& o) { string_index(j, o.proto); });
  column(j, "nchannels", ops, [&](const NcclOp& o) { j.value(int(o.nchannels)); });
  column(j, "channels", ops, [&](const NcclOp& o) { j.value(int(o.channels)); });
  // Issue 27: the plan (kernel) each op ran in, and ops whose GPU times belong to other work.
  column(j, "group", ops, [&](const NcclOp& o) {
    if (o.group) j.value(o.group); else j.null();
  });
  column(j, "gpu_shifted", ops, [&](const NcclOp& o) { j.value(o.gpu_shifted ? 1 : 0); });
  // Named host_* since version 3; they are NCCL's plan upload (docs/schema.md, version 4).
  column(j, "host_start_offset_ns", ops, [&](const NcclOp& o) { j.value(o.upload_start_ns - t0); });
  column(j, "host_dur_ns", ops, [&](const NcclOp& o) {
    if (o.upload_end_ns) j.value(o.upload_end_ns - o.upload_start_ns); else j.null();
  });
  column(j, "chan_host_start_offset_ns", ops, [&](const NcclOp& o) {
    if (o.chan_host_start_ns) j.value(o.chan_host_start_ns - t0); else j.null();
  });
  column(j, "chan_host_stop_offset_ns", ops, [&](const NcclOp& o) {
    if (o.chan_host_stop_ns) j.value(o.chan_host_stop_ns - t0); else j.null();
  });
  // GPU times stay in the GPU's clock; offsets from the window start keep the numbers short
  // (the window start is epoch ns, and so is %globaltimer on current drivers).
  column(j, "gpu_start_offset_ns", ops, [&](const NcclOp& o) {
    if (o.gpu_start) j.value(static_cast<int64_t>(o.gpu_start) - t0); else j.null();
  });
  column(j, "gpu_dur_ns", ops, [&](const NcclOp& o) {
    if (o.gpu_start && o.gpu_end) j.value(static_cast<int64_t>(o.gpu_end - o.gpu_start)); else j.null();
  });
  j.end_object();

  j.key("p2p").begin_array();
  for (const NcclP2pCounts& p : w.p2p)
    j.begin_object()
        .field("comm", p.comm)
        .field("sends", p.sends)
        .field("recvs", p.recvs)
        .field("send_bytes", p.send_bytes)
        .field("recv_bytes", p.recv_bytes)
        .end_object();
  j.end_array();

  const NcclDrops& d = w.dropped;
  j.key("dropped").begin_object()
      .field("pool_full", d.pool_full)
      .field("window_full", d.window_full)
      .field("comms_overflow", d.comms_overflow)
      .field("no_context", d.no_context)
      .field("orphan_kernel_ch", d.orphan_kernel_ch)
      .field("stale_handle", d.stale_handle)
      .field("no_gpu_time", d.no_gpu_time)
      .field("missing_channels", d.missing_channels)
      .field("bad_gpu_time", d.bad_gpu_time)
      .field("unfinished_at_exit", d.unfinished_at_exit)
      .field("shifted_kernel_ch", d.shifted_kernel_ch)
      .end_object();
  j.end_object();
}

}  // namespace laggard
