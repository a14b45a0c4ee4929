// What the hang watchdog reports about NCCL: collectives in flight, the last started and the
// last completed one. Flush thread only; reads live slots without stopping the callbacks, so
// an operation that changes meanwhile may be shown half old, half new (good enough for a rank
// that has not moved for minutes).
#include <bit>

#include "profiler.h"

namespace laggard::nccl {

CollectiveState Profiler::state_of(const Finished& f, int64_t) const {
  CollectiveState c;
  if (f.comm < comm_count()) {
    const CommSlot& cs = comms_[f.comm];
    c.comm_hash = cs.hash;
    c.comm_name = cs.name;
    c.comm_rank = cs.rank;
    c.comm_nranks = cs.nranks;
  }
  c.func = strings_.text(f.func);
  c.seq = f.seq;
  c.p2p = f.p2p;
  c.peer = f.p2p ? f.root_or_peer : -1;
  c.host_start_ns = f.host_start_mono + epoch_offset_ns_;
  c.host_stopped = f.host_end_mono != 0;
  c.channels = f.nchannels;
  c.channels_started = f.channels;  // harvested ops keep only the channels that stopped
  c.channels_stopped = f.channels;
  return c;
}

CollectiveProgress Profiler::describe() const {
  CollectiveProgress p;
  p.active = comm_count() > 0;
  uint32_t newest = last_started_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < opt_.pool_slots; ++i) {
    const Slot& s = slots_[i];
    if (!(s.state.load(std::memory_order_acquire) & kLive)) continue;
    Finished f{};
    f.comm = s.comm;
    f.func = s.func;
    f.p2p = s.p2p;
    f.root_or_peer = s.root_or_peer;
    f.nchannels = s.nchannels;
    f.seq = s.seq;
    f.host_start_mono = s.host_start;
    f.host_end_mono = s.host_end.load(std::memory_order_acquire);
    CollectiveState c = state_of(f, 0);
    c.channels_started = std::popcount(s.chan_started.load(std::memory_order_acquire));
    c.channels_stopped = std::popcount(s.chan_stopped.load(std::memory_order_acquire));
    p.in_flight.push_back(c);
    if (i == newest) p.last_started = c;
  }
  if (last_completed_) p.last_completed = state_of(*last_completed_, 0);
  for (const Finished& f : recent_incomplete_) {
    bool superseded = last_completed_ && last_completed_->comm == f.comm && last_completed_->seq >= f.seq;
    if (!superseded) {
      CollectiveState c = state_of(f, 0);
      c.channels_started = -1;  // given up on after stuck_timeout_ns: channel state unknown
      p.in_flight.push_back(c);
      if (!p.last_started || p.last_started->host_start_ns < c.host_start_ns) p.last_started = c;
    }
  }
  if (!p.last_started && last_completed_) p.last_started = p.last_completed;
  return p;
}

}  // namespace laggard::nccl
