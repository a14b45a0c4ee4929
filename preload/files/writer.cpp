#include "writer.h"

#include <algorithm>
#include <cstdio>

#include "clock.h"
#include "frame_out.h"
#include "gpu_json.h"
#include "gpu_health_json.h"
#include "json_out.h"
#include "nccl_json.h"
#include "private_fds.h"
#include "process_image.h"
#include "safe_write.h"

namespace laggard {
namespace {

// A rank's last write (clean exit, SIGTERM/SIGINT) is synced to disk: the job, or the node, may
// be gone next (safe_write.h, "Durability").
Durability last_words(bool final, int signal) { return final || signal ? Durability::synced : Durability::cached; }

void drops_json(JsonOut& j, const DropCounters& d) {
  j.begin_object()
      .field("ring_full", d.ring_full)
      .field("stack_overflow", d.stack_overflow)
      .field("unbalanced_pop", d.unbalanced_pop)
      .field("unmatched_end", d.unmatched_end)
      .field("start_end_evicted", d.start_end_evicted)
      .field("names_overflow", d.names_overflow)
      .field("occurrences_sampled", d.occurrences_sampled)
      .field("unclosed_at_exit", d.unclosed_at_exit)
      .field("sections_filtered", d.sections_filtered)
      .field("cupti_records_dropped", d.cupti_records_dropped)
      .field("gpu_buffer_full", d.gpu_buffer_full)
      .field("unmatched_correlation", d.unmatched_correlation)
      .field("gpu_no_timestamp", d.gpu_no_timestamp)
      .field("gpu_records_not_stored", d.gpu_records_not_stored)
      .end_object();
}

}  // namespace

std::string render_window(const WindowSnapshot& w, bool gpu_records) {
  std::string s;
  JsonOut j(s);
  j.begin_object()
      .field("index", w.index)
      .field("start_ns", w.start_ns)
      .field("end_ns", w.end_ns);
  j.key("dropped");
  drops_json(j, w.dropped);
  j.key("sections").begin_array();
  for (const SectionWindowStats& sec : w.sections) {
    j.begin_object().field("name", sec.name);
    j.key("domain");
    if (sec.domain.empty()) j.null(); else j.value(sec.domain);
    if (sec.folded) j.field("folded", true);
    j.key("parent");
    if (sec.parent.empty()) j.null(); else j.value(sec.parent);
    j.field("count", sec.count)
        .field("total_ns", sec.total_ns)
        .field("min_ns", sec.min_ns)
        .field("max_ns", sec.max_ns)
        .field("median_ns", sec.median_ns)
        .field("median_from_sample", sec.median_from_sample);
    std::vector<int64_t> rel;
    rel.reserve(sec.start_ns.size());
    for (int64_t t : sec.start_ns) rel.push_back(t - w.start_ns);
    j.key("occurrences").begin_object();
    j.key("start_offset_ns").array(rel);
    j.key("dur_ns").array(sec.dur_ns);
    j.key("tid").array(sec.tid);
    j.end_object();
    j.end_object();
  }
  j.end_array();
  if (w.gpu.present) {
    j.key("gpu");
    render_gpu_window(j, w.gpu, w.start_ns, gpu_records);
  }
  if (w.nccl.active) render_nccl(j, w.nccl, w.start_ns);
  if (w.gpu_health.present) render_gpu_health(j, w.gpu_health);
  if (w.cpu_wait.present) {  // issue 30: optional, within schema version 5
    j.key("cpu_wait")
        .begin_object()
        .field("threads", w.cpu_wait.threads)
        .field("run_ns", w.cpu_wait.run_ns)
        .field("wait_ns", w.cpu_wait.wait_ns)
        .field("max_thread_wait_ns", w.cpu_wait.max_thread_wait_ns)
        .field("timeslices", w.cpu_wait.timeslices);
    if (!w.cpu_wait.ticks.empty()) {
      std::vector<int64_t> ends, waits;
      for (const TickWait& t : w.cpu_wait.ticks) {
        ends.push_back(t.end_ns - w.start_ns);
        waits.push_back(t.wait_ns);
      }
      j.key("nvtx").begin_object().field("threads", w.cpu_wait.nvtx_threads);
      j.key("end_offset_ns").array(ends);
      j.key("wait_ns").array(waits);
      j.end_object();
    }
    j.end_object();
  }
  if (!w.paused.empty()) {  // schema version 5: pause and resume
    j.key("paused").begin_array();
    for (const PausedSpan& p : w.paused)
      j.begin_object()
          .field("start_ns", p.start_ns)
          .field("end_ns", p.end_ns)
          .field("command", p.command)
          .field("seq", p.seq)
          .field("ongoing", p.ongoing)
          .end_object();
    j.end_array();
  }
  j.end_object();
  return s;
}

SegmentWriter::SegmentWriter(std::string run_dir, FileInfo info, int windows_per_file,
                             size_t max_segment_bytes, size_t max_unwritten_bytes)
    : run_dir_(std::move(run_dir)),
      info_(std::move(info)),
      windows_per_file_(windows_per_file < 1 ? 1 : windows_per_file),
      max_segment_bytes_(max_segment_bytes),
      max_unwritten_bytes_(max_unwritten_bytes) {}

std::string SegmentWriter::file_name(int segment) const {
  char tail[32];
  std::snprintf(tail, sizeof tail, "-seg%04d.%s", segment, format_ == FileFormat::binary ? "lgr" : "json");
  return rank_file_stem(info_.rank, info_.pid, info_.image) + tail;
}

std::string SegmentWriter::current_path() const {
  int segment = format_ == FileFormat::binary ? std::max(created_segment_, 0) : current_.number;
  return run_dir_ + "/" + file_name(segment);
}

std::string SegmentWriter::render_header(int segment, const DropCounters& totals, bool final, int signal,
                                         int64_t last_end_ns) const {
  std::string s;
  JsonOut j(s);
  j.begin_object()
      .field("schema", "laggard-rank")
      .field("schema_version", kSchemaVersion)
      .field("run_id", info_.run_id)
      .field("run_id_source", info_.run_id_source)
      .field("rank", info_.rank);
  j.key("local_rank");
  if (info_.local_rank >= 0) j.value(info_.local_rank); else j.null();
  j.key("world_size");
  if (info_.world_size > 0) j.value(info_.world_size); else j.null();
  j.field("rank_source", info_.rank_source)
      .field("host", info_.host)
      .field("pid", info_.pid)
      .field("ppid", info_.ppid);
  if (!info_.image.empty()) j.field("image", info_.image).field("started_ticks", info_.started_ticks);
  j.field("segment", segment)
      .field("windows_lost", windows_lost_)
      .field("process_start_ns", info_.process_start_ns)
      .field("data_end_ns", last_end_ns)
      .field("written_ns", info_.written_ns ? info_.written_ns : realtime_ns())
      .field("final", final);
  j.key("signal");
  if (signal) j.value(signal); else j.null();
  j.key("clock").begin_object()
      .field("source", "CLOCK_MONOTONIC + epoch_offset_ns")
      .field("epoch_offset_ns", info_.epoch_offset_ns);
  j.key("gpu_offset_ns");
  if (gpu_status_.has_clock) j.value(gpu_status_.clock_offset_ns); else j.null();
  j.key("gpu_offset_uncertainty_ns");
  if (gpu_status_.has_clock) j.value(gpu_status_.clock_uncertainty_ns); else j.null();
  j.end_object();
  j.key("config").begin_object()
      .field("flush_s", info_.flush_s)
      .field("sections", info_.sections_filter)
      .field("max_occurrences", info_.max_occurrences)
      .field("cupti", info_.cupti_enabled)
      .field("profiling_interval", info_.profiling_interval)
      .end_object();
  j.key("capture").begin_object().field("nvtx", info_.nvtx_status);
  j.field("cupti", gpu_status_.cupti.empty() ? std::string(info_.cupti_enabled ? "idle" : "off: LAGGARD_CUPTI=0")
                                             : gpu_status_.cupti);
  if (!gpu_status_.library.empty()) j.field("cupti_library", gpu_status_.library);
  if (gpu_status_.version) j.field("cupti_version", gpu_status_.version);
  if (!info_.nccl_status.empty()) j.field("nccl", info_.nccl_status);
  j.end_object();
  j.key("dropped");
  drops_json(j, totals);
  return s;  // left open: the caller appends "windows"
}

std::string SegmentWriter::render(const Segment& seg, const DropCounters& totals, bool final, int signal) const {
  std::string doc = render_header(seg.number, totals, final, signal, seg.data_end_ns);
  doc += ",\"windows\":[";
  for (size_t i = 0; i < seg.windows_json.size(); ++i) {
    if (i) doc += ',';
    doc += seg.windows_json[i];
  }
  doc += "]}\n";
  return doc;
}

void SegmentWriter::start_next_segment() {
  int next = current_.number + 1;
  if (current_.on_disk < current_.windows_json.size()) {
    unwritten_bytes_ += current_.bytes;
    unwritten_.push_back(std::move(current_));
    while (unwritten_bytes_ > max_unwritten_bytes_ && !unwritten_.empty()) drop_oldest_unwritten();
  }
  current_ = Segment{};
  current_.number = next;
}

void SegmentWriter::drop_oldest_unwritten() {
  Segment& old = unwritten_.front();
  windows_lost_ += old.windows_json.size() - old.on_disk;  // its older copy on disk stays valid
  unwritten_bytes_ -= old.bytes;
  unwritten_.pop_front();
}

std::string SegmentWriter::write(const WindowSnapshot& w, const DropCounters& totals, bool final,
                                 int signal) {
  if (!w.gpu_status.cupti.empty()) gpu_status_ = w.gpu_status;
  const Durability durability = last_words(final, signal);
  if (signal) signal_received_ = signal;
  if (format_ == FileFormat::binary) return write_binary(w, totals, final, durability);
  std::string rendered = render_window(w);
  // Start a new segment when this window would overflow the current one.
  if (!current_.windows_json.empty() &&
      (static_cast<int>(current_.windows_json.size()) >= windows_per_file_ ||
       current_.bytes + rendered.size() > max_segment_bytes_))
    start_next_segment();
  current_.bytes += rendered.size();
  current_.windows_json.push_back(std::move(rendered));
  current_.data_end_ns = w.end_ns;

  std::string err;
  run_with_private_fds([&] { err = write_json_segments(totals, final, durability); });
  return err;
}

// On the private-table thread (private_fds.h): a window's temp file must not take a descriptor
// number the application is about to get, and the kept run directory stays where the
// application cannot close it.
std::string SegmentWriter::write_json_segments(const DropCounters& totals, bool final, Durability durability) {
  RunDirFd dir(run_dir_, created_dir_);
  if (!dir.ok()) return dir.error();
  if (dir.created()) created_dir_ = dir.identity();
  if (!cleaned_stale_) {
    cleaned_stale_ = true;
    dir.remove_stale_temp_files(info_.rank, info_.pid);
  }
  // Oldest first, so the files on disk stay contiguous; stop at the first failure (a hung or
  // full file system fails them all, and each try may block).
  while (!unwritten_.empty()) {
    Segment& old = unwritten_.front();
    if (std::string err = dir.write_atomically(file_name(old.number), render(old, totals, false, 0)); !err.empty())
      return err;
    unwritten_bytes_ -= old.bytes;
    unwritten_.pop_front();
  }
  if (std::string err = dir.write_atomically(file_name(current_.number),
                                             render(current_, totals, final, signal_received_), durability);
      !err.empty())
    return err;
  current_.on_disk = current_.windows_json.size();
  return "";
}

// Binary format (schema v5). The frame's header is the whole file header as of this window, so
// the newest whole frame says what a rewritten JSON header would.
std::string SegmentWriter::write_binary(const WindowSnapshot& w, const DropCounters& totals, bool final,
                                        Durability durability) {
  std::string window = render_window(w, false);
  std::string records = w.gpu.present ? encode_gpu_block(w.gpu, w.start_ns) : std::string();
  size_t size = window.size() + records.size();  // before compression: segments hold <= max bytes of data
  if (frame_windows_ > 0 && (frame_windows_ >= windows_per_file_ || frame_bytes_ + size > max_segment_bytes_)) {
    ++current_.number;
    frame_windows_ = 0;
    frame_bytes_ = 0;
  }
  ++frame_windows_;
  frame_bytes_ += size;
  make_room(size);  // first, so the header counts what it dropped
  std::string header = render_header(current_.number, totals, final, signal_received_, w.end_ns) + "}";
  std::string frame = encode_frame(header, window, records);
  pending_bytes_ += frame.size();
  pending_frames_.push_back({current_.number, std::move(frame)});

  std::string err;
  run_with_private_fds([&] {  // as write_json_segments
    RunDirFd dir(run_dir_, created_dir_);
    if (!dir.ok()) {
      err = dir.error();
      return;
    }
    if (dir.created()) created_dir_ = dir.identity();
    err = append_pending(dir, durability);
  });
  return err;
}

// Keeps unwritten frames within max_unwritten_bytes: the oldest go, counted as lost windows.
void SegmentWriter::make_room(size_t bytes) {
  while (!pending_frames_.empty() && pending_bytes_ + bytes > max_unwritten_bytes_) {
    pending_bytes_ -= pending_frames_.front().bytes.size();
    pending_frames_.pop_front();
    ++windows_lost_;
  }
}

// Oldest first, stopping at the first failure (a hung or full file system fails them all).
std::string SegmentWriter::append_pending(const RunDirFd& dir, Durability durability) {
  while (!pending_frames_.empty()) {
    PendingFrame& f = pending_frames_.front();
    bool fresh = f.segment > created_segment_;
    Durability d = pending_frames_.size() == 1 ? durability : Durability::cached;  // the last frame syncs the file
    if (std::string err = dir.append_whole(file_name(f.segment), f.bytes, fresh, d); !err.empty()) return err;
    created_segment_ = std::max(created_segment_, f.segment);
    pending_bytes_ -= f.bytes.size();
    pending_frames_.pop_front();
  }
  return "";
}

}  // namespace laggard
