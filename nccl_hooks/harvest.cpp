// Flush-thread side of the NCCL source (see profiler.h): decide which in-flight operations are
// finished, copy them out, free their slots, and build the window's records.
#include <bit>
#include <cstring>
#include <limits>
#include <map>

#include "profiler.h"

namespace laggard::nccl {

uint8_t Profiler::element_size(uint16_t datatype) {
  if (datatype >= element_sizes_.size()) return 0;
  if (element_sizes_[datatype] < 0) {
    element_sizes_[datatype] = 0;
    element_sizes_[datatype] = element_size_of(strings_.text(datatype));
  }
  return static_cast<uint8_t>(element_sizes_[datatype]);
}

void Profiler::harvest(int64_t now, bool final) {
  for (uint32_t i = 0; i < opt_.pool_slots; ++i) {
    Slot& s = slots_[i];
    uint32_t state = s.state.load(std::memory_order_acquire);
    if (!(state & kLive)) continue;
    uint32_t gen = s.gen.load(std::memory_order_relaxed);
    uint64_t stopped = s.chan_stopped.load(std::memory_order_acquire);
    uint64_t started = s.chan_started.load(std::memory_order_acquire);
    Track& t = track_[i];
    if (t.gen != gen || t.state != state || t.started != started || t.stopped != stopped)
      t = {gen, state, started, stopped, now};
    bool host_done = state & kHostStopped;
    bool all_started_stopped = (started & ~stopped) == 0;
    int channels = std::popcount(stopped);
    int64_t quiet = now - t.since;
    bool complete = host_done && (opt_.kernel_events ? started && all_started_stopped &&
                                                           channels >= std::max<int>(1, s.nchannels)
                                                     : true);
    // Until NCCL has sent any GPU channel event, expect none (another tool may own the mask,
    // or the collectives run on copy engines) rather than holding slots for long.
    int64_t no_kernel_wait = kernel_seen_.load(std::memory_order_relaxed) ? opt_.no_kernel_timeout_ns
                                                                           : opt_.partial_timeout_ns;
    bool give_up = (host_done && !started && quiet >= no_kernel_wait) ||
                   (host_done && started && all_started_stopped && quiet >= opt_.partial_timeout_ns) ||
                   quiet >= opt_.stuck_timeout_ns;
    if (complete || give_up || final) collect(i, complete, final);
  }
}

void Profiler::collect(uint32_t index, bool complete, bool final) {
  Slot& s = slots_[index];
  // Retire the generation first: from here on every late callback for this op is ignored.
  uint32_t gen = s.gen.load(std::memory_order_relaxed);
  s.state.store(0, std::memory_order_relaxed);
  s.gen.store(gen + 1, std::memory_order_release);

  Finished f{};
  f.comm = s.comm;
  f.func = s.func;
  f.datatype = s.datatype;
  f.algo = s.algo;
  f.proto = s.proto;
  f.p2p = s.p2p;
  f.root_or_peer = s.root_or_peer;
  f.nchannels = s.nchannels;
  uint64_t started = s.chan_started.load(std::memory_order_acquire);
  uint64_t stopped = s.chan_stopped.load(std::memory_order_acquire);
  f.channels = static_cast<uint8_t>(std::popcount(stopped));
  f.seq = s.seq;
  f.count = s.count;
  f.host_start_mono = s.host_start;
  f.host_end_mono = s.host_end.load(std::memory_order_acquire);
  uint64_t g0 = s.gpu_start.load(std::memory_order_relaxed);
  f.gpu_start = g0 == kNoGpuStart ? 0 : g0;
  f.gpu_end = s.gpu_end.load(std::memory_order_relaxed);
  f.chan_host_start_mono = s.chan_host_start.load(std::memory_order_relaxed);
  f.chan_host_stop_mono = s.chan_host_stop.load(std::memory_order_relaxed);
  free_.push(index);

  if (f.gpu_start && f.gpu_end && f.gpu_end < f.gpu_start) {
    ++flush_drops_.bad_gpu_time;  // e.g. NCCL's per-channel timestamp ring overran
    f.gpu_start = f.gpu_end = 0;
  }
  if (!f.gpu_end) f.gpu_start = 0;  // a start without any stop says nothing about duration
  if (!complete) {
    if (final && (!f.host_end_mono || (started & ~stopped))) ++flush_drops_.unfinished_at_exit;
    else if (!f.gpu_start) ++flush_drops_.no_gpu_time;
    else ++flush_drops_.missing_channels;
  }
  if (complete) {
    last_completed_ = f;
  } else if (!final && !f.p2p) {
    if (recent_incomplete_.size() >= 16) recent_incomplete_.erase(recent_incomplete_.begin());
    recent_incomplete_.push_back(f);
  }
  if (finished_.size() >= opt_.max_ops_per_window) {
    ++flush_drops_.window_full;
    return;
  }
  finished_.push_back(f);
}

NcclWindow Profiler::take_window() {
  NcclWindow w;
  uint32_t ncomms = comm_count();
  w.active = ncomms > 0 || counters_.comms_overflow.load(std::memory_order_relaxed) > 0;

  std::map<uint32_t, uint32_t> comm_index;  // registry index -> window index
  auto add_comm = [&](uint32_t c) {
    auto [it, added] = comm_index.emplace(c, static_cast<uint32_t>(w.comms.size()));
    if (added) {
      const CommSlot& cs = comms_[c];
      w.comms.push_back({cs.hash, cs.name, cs.nranks, cs.rank, cs.nnodes});
    }
    return it->second;
  };
  std::map<uint16_t, uint32_t> string_index;
  auto add_string = [&](uint16_t id) -> uint32_t {
    if (id == StringCache::kNone) return kNcclNoString;
    auto [it, added] = string_index.emplace(id, static_cast<uint32_t>(w.strings.size()));
    if (added) w.strings.emplace_back(strings_.text(id));
    return it->second;
  };

  // New communicators, in order; one still being registered waits for the next window.
  while (comms_written_ < ncomms && comms_[comms_written_].ready.load(std::memory_order_acquire))
    add_comm(comms_written_++);

  w.table_version = table_version_.load(std::memory_order_relaxed);
  w.inits = inits_.load(std::memory_order_relaxed);
  w.kernel_events = opt_.kernel_events_status;

  // P2p counts since the last window, per communicator.
  if (p2p_seen_.size() < ncomms) p2p_seen_.resize(ncomms);
  for (uint32_t c = 0; c < ncomms; ++c) {
    const CommSlot& cs = comms_[c];
    if (!cs.ready.load(std::memory_order_acquire)) continue;
    P2pSeen now{cs.sends.load(std::memory_order_relaxed), cs.recvs.load(std::memory_order_relaxed),
                cs.send_bytes.load(std::memory_order_relaxed), cs.recv_bytes.load(std::memory_order_relaxed)};
    P2pSeen& seen = p2p_seen_[c];
    if (now.sends == seen.sends && now.recvs == seen.recvs) continue;
    w.p2p.push_back({0, now.sends - seen.sends, now.recvs - seen.recvs, now.send_bytes - seen.send_bytes,
                     now.recv_bytes - seen.recv_bytes});
    w.p2p.back().comm = add_comm(c);
    seen = now;
  }

  w.ops.reserve(finished_.size());
  for (const Finished& f : finished_) {
    NcclOp op;
    op.comm = add_comm(f.comm);
    op.func = add_string(f.func);
    op.datatype = add_string(f.datatype);
    op.algo = add_string(f.algo);
    op.proto = add_string(f.proto);
    op.p2p = f.p2p;
    (f.p2p ? op.peer : op.root) = f.root_or_peer;
    op.seq = f.seq;
    op.count = f.count;
    op.bytes = f.count * element_size(f.datatype);
    op.nchannels = f.nchannels;
    op.channels = f.channels;
    op.upload_start_ns = f.host_start_mono + epoch_offset_ns_;
    op.upload_end_ns = f.host_end_mono ? f.host_end_mono + epoch_offset_ns_ : 0;
    op.gpu_start = f.gpu_start;
    op.gpu_end = f.gpu_end;
    op.chan_host_start_ns = f.chan_host_start_mono ? f.chan_host_start_mono + epoch_offset_ns_ : 0;
    op.chan_host_stop_ns = f.chan_host_stop_mono ? f.chan_host_stop_mono + epoch_offset_ns_ : 0;
    w.ops.push_back(op);
  }
  finished_.clear();
  if (finished_.capacity() > 4 * opt_.pool_slots) finished_.shrink_to_fit();

  std::atomic<uint64_t>* live[5] = {&counters_.pool_full, &counters_.comms_overflow, &counters_.no_context,
                                    &counters_.orphan_kernel_ch, &counters_.stale_handle};
  uint64_t delta[5];
  for (int k = 0; k < 5; ++k) {
    uint64_t v = live[k]->load(std::memory_order_relaxed);
    delta[k] = v - seen_[k];
    seen_[k] = v;
  }
  w.dropped = flush_drops_;
  w.dropped.pool_full = delta[0];
  w.dropped.comms_overflow = delta[1];
  w.dropped.no_context = delta[2];
  w.dropped.orphan_kernel_ch = delta[3];
  w.dropped.stale_handle = delta[4];
  flush_drops_ = {};
  return w;
}

}  // namespace laggard::nccl
