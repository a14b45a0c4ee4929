// Hot path and communicators of the NCCL source (see profiler.h). Everything here may run on
// several threads at once: only atomics and the lock-free free list, no allocation, no lock.
#include "profiler.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "clock.h"
#include "pause_state.h"
#include "thread_registry.h"

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
      track_(opt_.pool_slots),
      element_sizes_(StringCache::kMaxStrings, -1) {
  for (uint32_t i = 0; i < opt_.pool_slots; ++i) free_.push(i);
}

uint32_t Profiler::comm_count() const {
  return std::min(ncomms_.load(std::memory_order_acquire), opt_.max_comms);
}

void* Profiler::add_comm(uint64_t hash, const char* name, int nnodes, int nranks, int rank, int table_version) {
  inits_.fetch_add(1, std::memory_order_relaxed);
  if (table_version) table_version_.store(table_version, std::memory_order_relaxed);
  uint32_t i = ncomms_.fetch_add(1, std::memory_order_acq_rel);
  if (i >= opt_.max_comms) {
    bump(counters_.comms_overflow);
    return nullptr;
  }
  CommSlot& c = comms_[i];
  c.hash = hash;
  c.nranks = nranks;
  c.rank = rank;
  c.nnodes = nnodes;
  if (name) {
    std::strncpy(c.name, name, sizeof c.name - 1);
    c.name[sizeof c.name - 1] = '\0';
  }
  c.ready.store(true, std::memory_order_release);
  return &c;
}

void Profiler::finalize_comm(void* context) {
  // Contexts live as long as the process: NCCL's proxy may still report under this one, and the
  // communicator's operations are written by the flush thread, not here.
  if (CommSlot* c = comm_of(context)) c->finalized.store(true, std::memory_order_relaxed);
}

Profiler::CommSlot* Profiler::comm_of(void* context) const {
  auto base = reinterpret_cast<uintptr_t>(comms_.get());
  auto p = reinterpret_cast<uintptr_t>(context);
  if (p < base || p >= base + uintptr_t{opt_.max_comms} * sizeof(CommSlot) || (p - base) % sizeof(CommSlot))
    return nullptr;
  CommSlot* c = static_cast<CommSlot*>(context);
  return c->ready.load(std::memory_order_acquire) ? c : nullptr;
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

Profiler::Slot* Profiler::begin_op(void* context) {
  CommSlot* comm = comm_of(context);
  if (!comm) {
    bump(counters_.no_context);
    return nullptr;
  }
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
  return &s;
}

void* Profiler::publish(Slot& s) {
  uint32_t gen = s.gen.load(std::memory_order_relaxed) + 1;  // odd: live
  s.gen.store(gen, std::memory_order_release);
  s.state.store(kLive, std::memory_order_release);
  last_started_.store(static_cast<uint32_t>(&s - slots_.get()), std::memory_order_relaxed);
  watch::note_collective_event();
  return encode(kTagOp, 0, static_cast<uint32_t>(&s - slots_.get()), gen);
}

void* Profiler::start_coll(void* context, const CollInfo& info) {
  // Paused by `laggard ctl`: not recorded and not counted as lost; the handle is the one
  // p2p operations get, which every later callback ignores.
  if (capture_paused()) return p2p_handle();
  Slot* s = begin_op(context);
  if (!s) return nullptr;
  s->p2p = false;
  s->seq = info.seq;
  s->count = info.count;
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
  (recv ? comm->recvs : comm->sends).fetch_add(1, std::memory_order_relaxed);
  (recv ? comm->recv_bytes : comm->send_bytes).fetch_add(bytes, std::memory_order_relaxed);
  return p2p_handle();
}

void* Profiler::start_kernel_ch(void* parent, uint8_t channel, uint64_t gpu_start) {
  if ((reinterpret_cast<uint64_t>(parent) & 3) == kTagGroup) return nullptr;  // a p2p op's channel
  Slot* s = slot_of(parent, kTagOp, nullptr);
  if (!s || channel >= 64) {
    bump(counters_.orphan_kernel_ch);
    return nullptr;
  }
  if (!kernel_seen_.load(std::memory_order_relaxed)) kernel_seen_.store(true, std::memory_order_relaxed);
  uint64_t bit = uint64_t{1} << channel;
  // One clock read per op: the first channel's callback (NCCL's proxy starts every channel
  // before it stops any, transport/profiler.cc). A plain load first: fetch_or whose result is
  // used costs a compare-exchange loop on x86, and two proxies racing here both store a time.
  const bool first = s->chan_started.load(std::memory_order_relaxed) == 0;
  s->chan_started.fetch_or(bit, std::memory_order_acq_rel);
  if (first) s->chan_host_start.store(mono_ns(), std::memory_order_relaxed);
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

void Profiler::stop(void* handle) {
  const uint32_t tag = reinterpret_cast<uint64_t>(handle) & 3;
  if (!handle || tag == kTagGroup) return;
  uint32_t channel = 0;
  if (tag == kTagKernel) {
    if (Slot* k = slot_of(handle, kTagKernel, &channel)) {
      uint64_t bit = uint64_t{1} << channel;
      uint64_t before = k->chan_stopped.fetch_or(bit, std::memory_order_acq_rel);
      if (!(before & bit)) {
        watch::note_collective_event();
        // The stop that completes the announced channels: one clock read per op.
        if (std::popcount(before | bit) == std::max<int>(1, k->nchannels))
          k->chan_host_stop.store(mono_ns(), std::memory_order_relaxed);
        return;
      }
    }
  } else if (Slot* s = slot_of(handle, kTagOp, nullptr)) {
    int64_t expected = 0;
    if (s->host_end.compare_exchange_strong(expected, mono_ns(), std::memory_order_acq_rel)) {
      s->state.fetch_or(kHostStopped, std::memory_order_release);
      watch::note_collective_event();
      return;
    }
  }
  bump(counters_.stale_handle);
}

}  // namespace laggard::nccl
