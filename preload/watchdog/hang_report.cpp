#include "hang_report.h"

#include <cstdio>

#include "json_out.h"
#include "writer.h"

namespace laggard {
namespace {

void render_collective(JsonOut& j, const CollectiveState& c) {
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(c.comm_hash));
  j.begin_object()
      .field("comm", std::string_view(id))  // as the rank files' nccl.comms[].id
      .field("comm_name", c.comm_name)
      .field("comm_rank", c.comm_rank)
      .field("comm_nranks", c.comm_nranks)
      .field("func", c.func);
  if (c.p2p) j.field("peer", c.peer); else j.field("seq", c.seq);
  j.field("host_start_ns", c.host_start_ns)
      .field("host_stopped", c.host_stopped)
      .field("channels", c.channels)
      .field("channels_started", c.channels_started)
      .field("channels_stopped", c.channels_stopped)
      .end_object();
}

void render_thread(JsonOut& j, const ThreadReport& t) {
  j.begin_object().field("tid", t.tid).field("name", t.name).field("main", t.main).field("status", t.status);
  if (!t.method.empty()) j.field("method", t.method);
  j.key("frames").begin_array();
  for (const StackFrame& f : t.frames) {
    j.begin_object().field("pc", f.pc).field("module", f.module).field("module_base", f.module_base);
    j.field("symbol", f.symbol).field("offset", f.offset).end_object();
  }
  j.end_array();
  j.key("sections").begin_array();
  for (const OpenSection& s : t.sections)
    j.begin_object().field("name", s.name).field("start_ns", s.start_ns).end_object();
  j.end_array().end_object();
}

}  // namespace

std::string render_hang_report(const HangReport& r) {
  std::string s;
  JsonOut j(s);
  j.begin_object()
      .field("schema", "laggard-hang")
      .field("schema_version", kSchemaVersion)
      .field("run_id", r.run_id)
      .field("rank", r.rank);
  j.key("local_rank");
  if (r.local_rank >= 0) j.value(r.local_rank); else j.null();
  j.key("world_size");
  if (r.world_size > 0) j.value(r.world_size); else j.null();
  j.field("host", r.host)
      .field("pid", r.pid);
  if (!r.image.empty()) j.field("image", r.image);
  j.field("index", r.index)
      .field("written_ns", r.written_ns)
      .field("last_progress_ns", r.last_progress_ns)
      .field("hang_s", r.hang_s)
      .field("signal", r.signal)
      .field("unwinder", r.unwinder);
  j.key("python");
  if (r.python.empty()) j.null(); else j.value(r.python);
  j.key("threads").begin_array();
  for (const ThreadReport& t : r.threads) render_thread(j, t);
  j.end_array();
  j.key("nccl").begin_object().field("active", r.collectives.active);
  j.key("in_flight").begin_array();
  for (const CollectiveState& c : r.collectives.in_flight) render_collective(j, c);
  j.end_array();
  j.key("last_started");
  if (r.collectives.last_started) render_collective(j, *r.collectives.last_started); else j.null();
  j.key("last_completed");
  if (r.collectives.last_completed) render_collective(j, *r.collectives.last_completed); else j.null();
  j.end_object().end_object();
  s += '\n';
  return s;
}

std::string hang_report_name(int rank, long pid, const std::string& image, int index) {
  char name[128];
  if (image.empty()) std::snprintf(name, sizeof name, "hang-rank%05d-%ld-%04d.json", rank, pid, index);
  else std::snprintf(name, sizeof name, "hang-rank%05d-%ld-%.16s-%04d.json", rank, pid, image.c_str(), index);
  return name;
}

}  // namespace laggard
