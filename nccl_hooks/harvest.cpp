// Flush-thread side of the NCCL source (see profiler.h): decide which in-flight operations are
// finished, copy them out, free their slots, and build the window's records.
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "clock.h"

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

// Whether to stop waiting for an op's missing GPU channel events (see ProfilerOptions).
bool Profiler::give_up(const Slot& s, uint32_t state, uint64_t started, uint64_t stopped, int64_t quiet, int64_t now,
                       bool pool_tight) const {
  if (quiet >= opt_.stuck_timeout_ns) return true;
  if (!(state & kHostStopped)) return false;
  if (started) return (started & ~stopped) == 0 && quiet >= opt_.partial_timeout_ns;
  // No channel yet. The GPU may be far behind its CPU: wait as long as the communicator's GPU
  // makes progress and has not yet reached this op.
  const CommSlot& c = comms_[s.comm];
  const int64_t reached = c.gpu_reached.load(std::memory_order_relaxed);
  if (reached > s.host_start) return quiet >= opt_.partial_timeout_ns;  // overtaken: none will come
  const int64_t gpu_seen = c.gpu_event_mono.load(std::memory_order_relaxed);
  const int64_t gpu_quiet = now - std::max(gpu_seen, s.host_end.load(std::memory_order_relaxed));
  if (gpu_quiet >= opt_.no_kernel_timeout_ns) return true;
  // Running out of slots while a communicator never reports GPU channels (copy-engine
  // collectives, another tool's mask): its ops leave first.
  return pool_tight && gpu_seen == 0 && quiet >= opt_.partial_timeout_ns / 10;
}

void Profiler::harvest(int64_t now, bool final) {
  const bool pool_tight = live_ops_ > opt_.pool_slots / 4 * 3;
  uint32_t live = 0;
  for (uint32_t i = 0; i < opt_.pool_slots; ++i) {
    Slot& s = slots_[i];
    uint32_t state = s.state.load(std::memory_order_acquire);
    if (!(state & kLive)) continue;
    ++live;
    uint32_t gen = s.gen.load(std::memory_order_relaxed);
    uint64_t stopped = s.chan_stopped.load(std::memory_order_acquire);
    uint64_t started = s.chan_started.load(std::memory_order_acquire);
    Track& t = track_[i];
    if (t.gen != gen || t.state != state || t.started != started || t.stopped != stopped) {
      t = {gen, state, started, stopped, now};
      ++progress_;
    }
    bool host_done = state & kHostStopped;
    int channels = std::popcount(stopped);
    bool complete = host_done && (s.expect_kernel ? started && (started & ~stopped) == 0 &&
                                                        channels >= std::max<int>(1, s.nchannels)
                                                  : true);
    if (complete || final || give_up(s, state, started, stopped, now - t.since, now, pool_tight)) {
      collect(i, complete, final);
      --live;
    }
  }
  live_ops_ = live;
}

void Profiler::collect(uint32_t index, bool complete, bool final) {
  Slot& s = slots_[index];
  // Retire the generation first: from here on every late callback for this op is ignored.
  uint32_t gen = s.gen.load(std::memory_order_relaxed);
  s.state.store(0, std::memory_order_relaxed);
  s.gen.store(gen + 1, std::memory_order_release);
  ++progress_;

  Finished f{};
  f.comm = s.comm;
  f.func = s.func;
  f.datatype = s.datatype;
  f.algo = s.algo;
  f.proto = s.proto;
  f.p2p = s.p2p;
  f.shifted = s.shifted;
  f.root_or_peer = s.root_or_peer;
  f.nchannels = s.nchannels;
  uint64_t started = s.chan_started.load(std::memory_order_acquire);
  uint64_t stopped = s.chan_stopped.load(std::memory_order_acquire);
  f.channels = static_cast<uint8_t>(std::popcount(stopped));
  f.seq = s.seq;
  f.count = s.count;
  f.group = s.group;
  f.host_start_mono = s.host_start;
  f.host_end_mono = s.host_end.load(std::memory_order_acquire);
  uint64_t g0 = s.gpu_start.load(std::memory_order_relaxed);
  f.gpu_start = g0 == kNoGpuStart ? 0 : g0;
  f.gpu_end = s.gpu_end.load(std::memory_order_relaxed);
  f.chan_host_start_mono = s.chan_host_start.load(std::memory_order_relaxed);
  f.chan_host_stop_mono = s.chan_host_stop.load(std::memory_order_relaxed);
  if (f.p2p) release_p2p(s);
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

// Destroyed communicators whose ops are all written, finalized a while ago: their slots go
// back for new communicators (elastic restarts and evaluation groups re-create them; without
// reuse a process would stop capturing after max_comms). Called at the end of take_window, when
// nothing written refers to them any more.
void Profiler::reuse_finalized_comms(int64_t now) {
  const uint32_t n = comm_count();
  std::vector<bool> busy(n, false);
  for (uint32_t i = 0; i < opt_.pool_slots; ++i)
    if (slots_[i].state.load(std::memory_order_acquire) & kLive) {
      uint32_t c = slots_[i].comm;
      if (c < n) busy[c] = true;
    }
  // Hang reports still name these (watch_describe.cpp reads the slot's name).
  if (last_completed_ && last_completed_->comm < n) busy[last_completed_->comm] = true;
  for (const Finished& f : recent_incomplete_)
    if (f.comm < n) busy[f.comm] = true;
  for (uint32_t c = 0; c < n; ++c) {
    CommSlot& cs = comms_[c];
    if (cs.state.load(std::memory_order_acquire) != kCommFinalized || busy[c]) continue;
    if (now - cs.finalized_mono < opt_.comm_reuse_after_ns) continue;  // late proxy callbacks
    if (comm_seen_[c].listed_gen != cs.gen.load(std::memory_order_relaxed)) continue;  // never listed yet
    cs.state.store(kCommFree, std::memory_order_release);
    comm_seen_[c] = {};
    free_comms_.push(c);
  }
}

NcclWindow Profiler::take_window() {
  NcclWindow w;
  const uint32_t ncomms = comm_count();
  w.active = ncomms > 0 || counters_.comms_overflow.load(std::memory_order_relaxed) > 0;

  std::map<uint32_t, uint32_t> comm_index;  // slot index -> window index
  auto add_comm = [&](uint32_t c) {
    auto [it, added] = comm_index.emplace(c, static_cast<uint32_t>(w.comms.size()));
    if (added) {
      const CommSlot& cs = comms_[c];
      w.comms.push_back({cs.hash, cs.name, cs.nranks, cs.rank, cs.nnodes, cs.device});
      comm_seen_[c].listed_gen = cs.gen.load(std::memory_order_relaxed);
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

  // New communicators (and re-created ones in reused slots), in slot order.
  for (uint32_t c = 0; c < ncomms; ++c) {
    const CommSlot& cs = comms_[c];
    if (cs.state.load(std::memory_order_acquire) == kCommFree) continue;
    if (comm_seen_[c].listed_gen != cs.gen.load(std::memory_order_relaxed)) {
      CommSeen fresh;
      comm_seen_[c] = fresh;  // p2p counts start over with the new communicator
      add_comm(c);
    }
  }

  w.table_version = table_version_.load(std::memory_order_relaxed);
  w.inits = inits_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    w.kernel_events = kernel_events_status_;
    w.displaced = displaced_;
  }

  // Untimed p2p counts since the last window, per communicator.
  for (uint32_t c = 0; c < ncomms; ++c) {
    const CommSlot& cs = comms_[c];
    if (cs.state.load(std::memory_order_acquire) == kCommFree) continue;
    CommSeen now = comm_seen_[c];
    now.sends = cs.sends.load(std::memory_order_relaxed);
    now.recvs = cs.recvs.load(std::memory_order_relaxed);
    now.send_bytes = cs.send_bytes.load(std::memory_order_relaxed);
    now.recv_bytes = cs.recv_bytes.load(std::memory_order_relaxed);
    CommSeen& seen = comm_seen_[c];
    if (now.sends == seen.sends && now.recvs == seen.recvs) continue;
    w.p2p.push_back({0, now.sends - seen.sends, now.recvs - seen.recvs, now.send_bytes - seen.send_bytes,
                     now.recv_bytes - seen.recv_bytes});
    w.p2p.back().comm = add_comm(c);
    seen.sends = now.sends;
    seen.recvs = now.recvs;
    seen.send_bytes = now.send_bytes;
    seen.recv_bytes = now.recv_bytes;
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
    op.group = f.group;
    op.gpu_shifted = f.shifted;
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

  std::atomic<uint64_t>* live[kCounters] = {&counters_.pool_full,       &counters_.comms_overflow,
                                            &counters_.no_context,      &counters_.orphan_kernel_ch,
                                            &counters_.stale_handle,    &counters_.shifted_kernel_ch};
  uint64_t delta[kCounters];
  for (int k = 0; k < kCounters; ++k) {
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
  w.dropped.shifted_kernel_ch = delta[5];
  flush_drops_ = {};
  reuse_finalized_comms(mono_ns());
  return w;
}

}  // namespace laggard::nccl
