// Hot path and communicators of the NCCL source (see profiler.h). Everything here may run on
// several threads at once: only atomics and the lock-free free list, no allocation, no lock.
#include "profiler.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "clock.h"
#include "pause_state.h"

namespace laggard::nccl {
namespace {

// Handle word: generation (32) | slot index (24) | channel (6) | tag (2). Never zero: tag >= 1.
void* encode(uint32_t tag, uint32_t channel, uint32_t index, uint32_t gen) {
  uint64_t v = uint64_t{gen} << 32 | uint64_t{index & 0xffffff} << 8 | uint64_t{channel & 63} << 2 | tag;
  return reinterpret_cast<void*>(v);
}

void atomic_min(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void atomic_max(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void bump(std::atomic<uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// NCCL's datatype names (ncclDatatypeToString). NCCL reports ncclUint8 as "Unknown" (no case
// in its name table), and AllGather/Broadcast counts are already in bytes with "ncclInt8".
struct DatatypeSize {
  const char* name;
  uint8_t bytes;
};
constexpr DatatypeSize kSizes[] = {
    {"ncclFloat32", 4},  {"ncclBfloat16", 2},  {"ncclFloat16", 2},      {"ncclInt8", 1},
    {"ncclInt32", 4},    {"ncclUint32", 4},    {"ncclInt64", 8},        {"ncclUint64", 8},
    {"ncclFloat64", 8},  {"ncclUint8", 1},     {"ncclFloat8e4m3", 1},   {"ncclFloat8e5m2", 1},
    {"Unknown", 1},
};

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 64;
  while (p < n && p < (1u << 24)) p <<= 1;
  return p;
}

}  // namespace

uint8_t element_size_of(const char* datatype) {
  if (!datatype) return 0;
  // NCCL passes pointers into one static name table: remember the last answer per thread.
  thread_local const char* last = nullptr;
  thread_local uint8_t last_size = 0;
  if (datatype == last) return last_size;
  uint8_t size = 0;
  for (const DatatypeSize& d : kSizes)
    if (std::strcmp(datatype, d.name) == 0) {
      size = d.bytes;
      break;
    }
  last = datatype;
  last_size = size;
  return size;
}

Profiler::Profiler(const ProfilerOptions& options, int64_t epoch_offset_ns)
    : opt_([&] {
        ProfilerOptions o = options;
        o.pool_slots = round_up_pow2(o.pool_slots);
        if (o.max_comms < 1) o.max_comms = 1;
        return o;
      }()),
      epoch_offset_ns_(epoch_offset_ns),
      slots_(new Slot[opt_.pool_slots]),
      free_(opt_.pool_slots),
      comms_(new CommSlot[opt_.max_comms]),
      free_comms_(round_up_pow2(opt_.max_comms)),
      kernel_events_(opt_.kernel_events),
      kernel_events_status_(opt_.kernel_events_status),
      track_(opt_.pool_slots),
      comm_seen_(opt_.max_comms),
      element_sizes_(StringCache::kMaxStrings, -1) {
  for (uint32_t i = 0; i < opt_.pool_slots; ++i) free_.push(i);
}

uint32_t Profiler::comm_count() const {
  return std::min(ncomms_.load(std::memory_order_acquire), opt_.max_comms);
}

void Profiler::switch_kernel_events_off(const std::string& why) {
  kernel_events_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(status_mu_);
  kernel_events_status_ = why;
}

void Profiler::set_displaced(const std::string& what) {
  std::lock_guard<std::mutex> lock(status_mu_);
  displaced_ = what;
}

uint32_t Profiler::claim_comm_slot() {
  uint32_t i;
  if (free_comms_.pop(&i)) return i;  // a destroyed communicator's, written and quiet
  i = ncomms_.fetch_add(1, std::memory_order_acq_rel);
  if (i >= opt_.max_comms) ncomms_.store(opt_.max_comms, std::memory_order_relaxed);  // no wrap-around
  return std::min(i, opt_.max_comms);
}

void* Profiler::add_comm(uint64_t hash, const char* name, int nnodes, int nranks, int rank, int table_version,
                         int device) {
  inits_.fetch_add(1, std::memory_order_relaxed);
  if (table_version) table_version_.store(table_version, std::memory_order_relaxed);
  uint32_t i = claim_comm_slot();
  if (i >= opt_.max_comms) {
    bump(counters_.comms_overflow);
    return nullptr;
  }
  CommSlot& c = comms_[i];
  c.hash = hash;
  c.nranks = nranks;
  c.rank = rank;
  c.nnodes = nnodes;
  c.device = device;
  c.table_version = table_version;
  std::memset(c.name, 0, sizeof c.name);
  if (name) std::strncpy(c.name, name, sizeof c.name - 1);
  // Cold path (NCCL's init thread): the per-peer p2p indices, reused when large enough.
  const int peers = std::clamp(nranks, 1, 1 << 20);
  if (c.p2p_peers < peers) {
    c.p2p_index.reset(new std::atomic<uint32_t>[2 * size_t(peers)]);
    c.p2p_peers = peers;
  }
  for (int p = 0; p < 2 * c.p2p_peers; ++p) c.p2p_index[p].store(0, std::memory_order_relaxed);
  for (auto* a : {&c.sends, &c.recvs, &c.send_bytes, &c.recv_bytes, &c.plans, &c.bcast_group_api, &c.p2p_plan})
    a->store(0, std::memory_order_relaxed);
  c.p2p_timed.store(0, std::memory_order_relaxed);
  c.p2p_timed_in_plan.store(0, std::memory_order_relaxed);
  c.bcast_root.store(-1, std::memory_order_relaxed);
  c.shifted.store(false, std::memory_order_relaxed);
  c.gpu_reached.store(0, std::memory_order_relaxed);
  c.gpu_event_mono.store(0, std::memory_order_relaxed);
  c.gen.fetch_add(1, std::memory_order_relaxed);
  c.state.store(kCommLive, std::memory_order_release);
  return &c;
}

void Profiler::finalize_comm(void* context) {
  // NCCL's proxy may still report ops of this communicator (their own handles say which); the
  // context is reused only once those are written and a while has passed (harvest.cpp).
  if (CommSlot* c = comm_of(context)) {
    c->finalized_mono = mono_ns();
    c->state.store(kCommFinalized, std::memory_order_release);
  }
}

Profiler::CommSlot* Profiler::comm_of(void* context) const {
  auto base = reinterpret_cast<uintptr_t>(comms_.get());
  auto p = reinterpret_cast<uintptr_t>(context);
  if (p < base || p >= base + uintptr_t{opt_.max_comms} * sizeof(CommSlot) || (p - base) % sizeof(CommSlot))
    return nullptr;
  CommSlot* c = static_cast<CommSlot*>(context);
  return c->state.load(std::memory_order_acquire) != kCommFree ? c : nullptr;
}

Profiler::Slot* Profiler::slot_of(void* handle, uint32_t tag, uint32_t* channel) const {
  auto v = reinterpret_cast<uint64_t>(handle);
  if ((v & 3) != tag) return nullptr;
  uint32_t index = static_cast<uint32_t>(v >> 8) & 0xffffff;
  if (index >= opt_.pool_slots) return nullptr;
  Slot& s = slots_[index];
  uint32_t gen = static_cast<uint32_t>(v >> 32);
  if (!(gen & 1) || s.gen.load(std::memory_order_acquire) != gen) return nullptr;  // odd: issued while live
  if (channel) *channel = static_cast<uint32_t>(v >> 2) & 63;
  return &s;
}

Profiler::Slot* Profiler::begin_op(CommSlot* comm) {
  uint32_t index;
  if (!free_.pop(&index)) {
    bump(counters_.pool_full);
    return nullptr;
  }
  Slot& s = slots_[index];
  s.chan_started.store(0, std::memory_order_relaxed);
  s.chan_stopped.store(0, std::memory_order_relaxed);
  s.gpu_start.store(kNoGpuStart, std::memory_order_relaxed);
  s.gpu_end.store(0, std::memory_order_relaxed);
  s.host_end.store(0, std::memory_order_relaxed);
  s.chan_host_start.store(0, std::memory_order_relaxed);
  s.chan_host_stop.store(0, std::memory_order_relaxed);
  s.comm = static_cast<uint32_t>(comm - comms_.get());
  s.host_start = mono_ns();
  s.shifted = comm->shifted.load(std::memory_order_relaxed);
  // Shifted GPU times are ignored unless the user asked to keep them: do not wait for them.
  s.expect_kernel = kernel_events_.load(std::memory_order_relaxed) && (!s.shifted || opt_.keep_shifted);
  return &s;
}

void* Profiler::publish(Slot& s) {
  uint32_t gen = s.gen.load(std::memory_order_relaxed) + 1;  // odd: live
  s.gen.store(gen, std::memory_order_release);
  s.state.store(kLive, std::memory_order_release);
  last_started_.store(static_cast<uint32_t>(&s - slots_.get()), std::memory_order_relaxed);
  return encode(kTagOp, 0, static_cast<uint32_t>(&s - slots_.get()), gen);
}

namespace {

// The plan number a Group handle carries (start_group); 0 for anything else.
uint64_t plan_of(void* group) {
  auto v = reinterpret_cast<uint64_t>(group);
  return (v & 3) == 1 && (v >> 2 & 63) == 2 ? v >> 8 : 0;
}

void* group_word(uint32_t kind, uint64_t number) {
  return reinterpret_cast<void*>(number << 8 | uint64_t{kind} << 2 | 1);
}

}  // namespace

void* Profiler::start_group(void* context) {
  CommSlot* c = comm_of(context);
  if (!c) return group_word(kKindPlain, 0);
  // One per plan, on the thread that launches it: no other thread writes this counter often.
  const uint64_t plan = c->plans.fetch_add(1, std::memory_order_relaxed) + 1;
  return group_word(kKindPlan, plan & ((uint64_t{1} << 56) - 1));
}

void* Profiler::group_api_handle() {
  // Unique per call of one thread; the thread's own storage address keeps threads apart. Only
  // compared for equality within one communicator, on the thread that enqueues to it.
  thread_local uint64_t calls = 0;
  static thread_local char self;
  const uint64_t salt = (reinterpret_cast<uintptr_t>(&self) >> 4) * 0x9e3779b97f4a7c15ull;
  return group_word(kKindGroupApi, (salt ^ ++calls) & ((uint64_t{1} << 56) - 1));
}

// NCCL 2.29+ (v6 table) runs a group's Broadcasts from two or more roots as one AllGatherV
// batch (enqueue.cc collTaskAppend, v2.29.7 2581-2601 / v2.30.7 2703-2723;
// scheduler/allgatherv_sched.cc ncclScheduleBcastTasksToPlan): the batch's proxy op gets
// eActivationMask 0 and no profiler proxy op (allgatherv_sched.cc v2.30.7 196-198), so the host's
// per-channel work counter (proxy.cc incWorkCounter) stays behind while the kernel advances its
// own by every work of the batch (device/common.h profiler(), 318-337). From then on each
// KernelCh timestamp on those channels belongs to an earlier work (NVIDIA/nccl#2368, #2369,
// unfixed at v2.30.7). A Broadcast from a single root is rewritten into an ordinary collective
// (enqueue.cc ncclPrepareTasks, v2.30.7 367-389) whose work counter stays in step (proxy.cc
// 761: incWorkCounter for ops without KernelCh), so it shifts nothing: NCCL just reports no Coll
// event for it. The CollApi event is still sent for every Broadcast (profiler.cc
// ncclProfilerStartCollApiEvent), with the root and under the group's GroupApi handle.
void Profiler::note_coll_api(void* context, const char* func, int root, void* group_api) {
  if (!func || func[0] != 'B' || std::strcmp(func, "Broadcast") != 0) return;
  CommSlot* c = comm_of(context);
  if (!c || c->table_version < 6 || c->shifted.load(std::memory_order_relaxed)) return;
  const uint64_t group = reinterpret_cast<uint64_t>(group_api);
  const bool same_group = group && c->bcast_group_api.load(std::memory_order_relaxed) == group;
  if (same_group && c->bcast_root.load(std::memory_order_relaxed) != root) {
    c->shifted.store(true, std::memory_order_relaxed);
    return;
  }
  if (!same_group) {
    c->bcast_group_api.store(group, std::memory_order_relaxed);
    c->bcast_root.store(root, std::memory_order_relaxed);
  }
}

void* Profiler::start_coll(void* context, const CollInfo& info) {
  // Paused by `laggard ctl`: not recorded and not counted as lost; the handle is the one
  // untimed p2p operations get, which every later callback ignores.
  if (capture_paused()) return p2p_handle();
  CommSlot* comm = comm_of(context);
  if (!comm) {
    bump(counters_.no_context);
    return nullptr;
  }
  Slot* s = begin_op(comm);
  if (!s) return nullptr;
  s->p2p = false;
  s->seq = info.seq;
  s->count = info.count;
  s->group = plan_of(info.group);
  s->root_or_peer = info.root;
  s->func = strings_.intern(info.func);
  s->datatype = strings_.intern(info.datatype);
  s->algo = strings_.intern(info.algo);
  s->proto = strings_.intern(info.proto);
  s->nchannels = info.nchannels;
  return publish(*s);
}

void* Profiler::start_p2p(void* context, const P2pInfo& info) {
  if (capture_paused()) return p2p_handle();
  CommSlot* comm = comm_of(context);
  if (!comm) {
    bump(counters_.no_context);
    return nullptr;
  }
  // NCCL's p2p func names are "Send" and "Recv" (ncclFuncToString, src/plugin/profiler.cc).
  const bool recv = info.func && info.func[0] == 'R';
  const uint64_t bytes = info.count * element_size_of(info.datatype);
  // Every p2p op takes its index, timed or not, so the k-th Send of one rank to a peer and the
  // k-th Recv of that peer from it stay one pair (NCCL matches them in order).
  uint64_t index = 0;
  if (info.peer >= 0 && info.peer < comm->p2p_peers)
    index = comm->p2p_index[(recv ? comm->p2p_peers : 0) + info.peer].fetch_add(1, std::memory_order_relaxed);
  // A plan is enqueued by one thread: plain loads and stores count its timed ops.
  const uint64_t plan = plan_of(info.group);
  if (comm->p2p_plan.load(std::memory_order_relaxed) != plan) {
    comm->p2p_plan.store(plan, std::memory_order_relaxed);
    comm->p2p_timed_in_plan.store(0, std::memory_order_relaxed);
  }
  Slot* s = nullptr;
  const uint32_t in_plan = comm->p2p_timed_in_plan.load(std::memory_order_relaxed);
  if (in_plan < opt_.p2p_timed_per_plan &&
      comm->p2p_timed.fetch_add(1, std::memory_order_relaxed) < opt_.p2p_timed_per_comm) {
    s = begin_op(comm);
    if (s) comm->p2p_timed_in_plan.store(in_plan + 1, std::memory_order_relaxed);
    else comm->p2p_timed.fetch_sub(1, std::memory_order_relaxed);  // pool full: counted, not timed
  } else if (in_plan < opt_.p2p_timed_per_plan) {
    comm->p2p_timed.fetch_sub(1, std::memory_order_relaxed);
  }
  if (!s) {
    (recv ? comm->recvs : comm->sends).fetch_add(1, std::memory_order_relaxed);
    (recv ? comm->recv_bytes : comm->send_bytes).fetch_add(bytes, std::memory_order_relaxed);
    return p2p_handle();
  }
  s->p2p = true;
  s->p2p_running.store(true, std::memory_order_relaxed);
  s->seq = index;
  s->count = info.count;
  s->group = plan_of(info.group);
  s->root_or_peer = info.peer;
  s->func = strings_.intern(info.func);
  s->datatype = strings_.intern(info.datatype);
  s->algo = s->proto = StringCache::kNone;
  s->nchannels = info.nchannels;
  return publish(*s);
}

void* Profiler::start_kernel_ch(void* parent, uint8_t channel, uint64_t gpu_start) {
  if ((reinterpret_cast<uint64_t>(parent) & 3) == kTagGroup) return nullptr;  // an untimed op's channel
  Slot* s = slot_of(parent, kTagOp, nullptr);
  if (!s || channel >= 64) {
    bump(counters_.orphan_kernel_ch);
    return nullptr;
  }
  if (s->shifted && !opt_.keep_shifted) {  // another work's timestamps: not recorded
    bump(counters_.shifted_kernel_ch);
    return nullptr;
  }
  uint64_t bit = uint64_t{1} << channel;
  // One clock read per op: the first channel's callback (NCCL's proxy starts every channel
  // before it stops any, transport/profiler.cc). A plain load first: fetch_or whose result is
  // used costs a compare-exchange loop on x86, and two proxies racing here both store a time.
  const bool first = s->chan_started.load(std::memory_order_relaxed) == 0;
  s->chan_started.fetch_or(bit, std::memory_order_acq_rel);
  if (first) {
    const int64_t now = mono_ns();
    s->chan_host_start.store(now, std::memory_order_relaxed);
    // The GPU's progress on the communicator, for the harvester's timeouts (plain stores: one
    // proxy thread reports a communicator's channels).
    CommSlot& c = comms_[s->comm];
    c.gpu_event_mono.store(now, std::memory_order_relaxed);
    if (c.gpu_reached.load(std::memory_order_relaxed) < s->host_start)
      c.gpu_reached.store(s->host_start, std::memory_order_relaxed);
  }
  if (gpu_start) atomic_min(s->gpu_start, gpu_start);
  uint32_t gen = static_cast<uint32_t>(reinterpret_cast<uint64_t>(parent) >> 32);
  return encode(kTagKernel, channel, static_cast<uint32_t>(s - slots_.get()), gen);
}

void Profiler::record_kernel_ch_stop(void* handle, uint64_t gpu_stop) {
  uint32_t channel = 0;
  Slot* s = slot_of(handle, kTagKernel, &channel);
  // A channel that already stopped: a stale handle NCCL kept from an earlier operation.
  if (!s || (s->chan_stopped.load(std::memory_order_acquire) >> channel & 1)) {
    bump(counters_.stale_handle);
    return;
  }
  if (gpu_stop) atomic_max(s->gpu_end, gpu_stop);
}

void Profiler::release_p2p(Slot& s) {
  if (s.p2p_running.exchange(false, std::memory_order_relaxed))
    comms_[s.comm].p2p_timed.fetch_sub(1, std::memory_order_relaxed);
}

void Profiler::stop(void* handle) {
  const uint32_t tag = reinterpret_cast<uint64_t>(handle) & 3;
  if (!handle || tag == kTagGroup) return;
  uint32_t channel = 0;
  if (tag == kTagKernel) {
    if (Slot* k = slot_of(handle, kTagKernel, &channel)) {
      uint64_t bit = uint64_t{1} << channel;
      uint64_t before = k->chan_stopped.fetch_or(bit, std::memory_order_acq_rel);
      if (!(before & bit)) {
        // The stop that completes the announced channels: one clock read per op.
        if (std::popcount(before | bit) == std::max<int>(1, k->nchannels)) {
          k->chan_host_stop.store(mono_ns(), std::memory_order_relaxed);
          if (k->p2p) release_p2p(*k);
        }
        return;
      }
    }
  } else if (Slot* s = slot_of(handle, kTagOp, nullptr)) {
    int64_t expected = 0;
    if (s->host_end.compare_exchange_strong(expected, mono_ns(), std::memory_order_acq_rel)) {
      s->state.fetch_or(kHostStopped, std::memory_order_release);
      return;
    }
  }
  bump(counters_.stale_handle);
}

}  // namespace laggard::nccl
