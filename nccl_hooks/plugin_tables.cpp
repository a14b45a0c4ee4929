// The profiler-plugin tables NCCL looks up by name (newest first: ncclProfiler_v6 in 2.29+,
// _v5 in 2.28, _v4 in 2.27) and their thin adapters onto the version-independent Profiler.
// Rules NCCL's loader and callers impose, and why each function looks the way it does:
// - init always returns success: NCCL 2.27 drops the plugin for the whole process on an
//   error, and 2.28+ adapters are left with null function pointers. A communicator is opted out
//   by leaving its context null instead; the activation mask is process-wide.
// - startEvent always writes *eHandle (null to drop): NCCL does not clear the slots it passes,
//   so an unwritten one would keep a stale handle from an earlier event.
// - state args are read only for the KernelCh stop (they are null for other states in 2.28+).
// - nothing may throw into NCCL.
#include "abi_v4.h"
#include "abi_v6.h"
#include "nccl_source.h"

#include <type_traits>

namespace laggard::nccl {
namespace {

abi::Result init_comm(int table_version, void** context, int* mask, uint64_t hash, const char* name, int nnodes,
                      int nranks, int rank) {
  if (context) *context = nullptr;
  try {
    Profiler* p = profiler_for_init(table_version);
    if (!p) {
      if (mask) *mask = 0;  // the whole process stays out: NCCL skips every event
      return abi::kSuccess;
    }
    void* ctx = add_comm_for_init(*p, table_version, hash, name, nnodes, nranks, rank);
    if (context) *context = ctx;
    // Collectives, p2p operations and, unless gated off (plugin_env.h), their per-channel GPU
    // times. NCCL also starts the parents of these (Group, GroupApi and CollApi events) and
    // hands them over: the Group handle numbers the plan, the API events mark Broadcasts.
    if (mask) *mask = abi::kColl | abi::kP2p | (p->kernel_events() ? int{abi::kKernelCh} : 0);
  } catch (...) {
  }
  return abi::kSuccess;
}

abi::Result init_v4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks, int rank,
                    abi::DebugLogger) {
  return init_comm(4, context, mask, hash, name, nnodes, nranks, rank);
}

abi::Result init_v5(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    abi::DebugLogger) {
  return init_comm(5, context, mask, id, name, nnodes, nranks, rank);
}

abi::Result init_v6(void** context, uint64_t id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    abi::DebugLogger) {
  return init_comm(6, context, mask, id, name, nnodes, nranks, rank);
}

// The Group event a collective or p2p operation belongs to: v4 names it as the parent, v5+ in
// parentGroup (their parent is the API event).
template <class D, class T>
void* group_of(const D* d, const T& op) {
  if constexpr (std::is_same_v<D, abi::DescrV4>) return d->parentObj;
  else return op.parentGroup;
}

// D: DescrV4 or DescrV5/V6; coll/p2p/kernelCh sit at the same offsets in all three.
template <class D>
abi::Result start_event(void* context, void** handle, D* d) {
  if (!handle) return abi::kSuccess;
  *handle = nullptr;
  try {
    Profiler* p = active_profiler();
    if (!p || !d) return abi::kSuccess;
    const uint64_t type = d->type;
    if (type == abi::kKernelCh) {  // the most frequent: one per channel
      *handle = p->start_kernel_ch(d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
    } else if (type == abi::kColl) {
      CollInfo c;
      c.seq = d->coll.seqNumber;
      c.func = d->coll.func;
      c.count = d->coll.count;
      c.root = d->coll.root;
      c.datatype = d->coll.datatype;
      c.nchannels = d->coll.nChannels;
      c.algo = d->coll.algo;
      c.proto = d->coll.proto;
      c.group = group_of(d, d->coll);
      *handle = p->start_coll(context, c);
    } else if (type == abi::kP2p) {
      P2pInfo i;
      i.func = d->p2p.func;
      i.count = d->p2p.count;
      i.peer = d->p2p.peer;
      i.datatype = d->p2p.datatype;
      i.nchannels = d->p2p.nChannels;
      i.group = group_of(d, d->p2p);
      *handle = p->start_p2p(context, i);
    } else if (type == abi::kGroup) {
      *handle = p->start_group(context);
    } else if constexpr (!std::is_same_v<D, abi::DescrV4>) {
      if (type == abi::kGroupApi) {
        *handle = Profiler::group_api_handle();
      } else if (type == abi::kCollApi) {
        p->note_coll_api(context, d->collApi.func, d->collApi.root, d->parentObj);
      }
    }
  } catch (...) {
    *handle = nullptr;
  }
  return abi::kSuccess;
}

abi::Result start_v4(void* context, void** handle, abi::DescrV4* d) { return start_event(context, handle, d); }
abi::Result start_v5(void* context, void** handle, abi::DescrV5* d) { return start_event(context, handle, d); }
abi::Result start_v6(void* context, void** handle, abi::DescrV6* d) { return start_event(context, handle, d); }

abi::Result stop_event(void* handle) {
  try {
    if (Profiler* p = active_profiler(); p && handle) p->stop(handle);
  } catch (...) {
  }
  return abi::kSuccess;
}

abi::Result record_state(void* handle, int state, abi::StateArgs* args) {
  try {
    if (state != abi::kStateKernelChStop || !args || !handle) return abi::kSuccess;
    if (Profiler* p = active_profiler()) p->record_kernel_ch_stop(handle, args->kernelCh.pTimer);
  } catch (...) {
  }
  return abi::kSuccess;
}

abi::Result finalize(void* context) {
  try {
    if (Profiler* p = active_profiler(); p && context) p->finalize_comm(context);
  } catch (...) {
  }
  return abi::kSuccess;
}

}  // namespace
}  // namespace laggard::nccl

// The exported tables (the only symbols of this folder visible outside the library; see
// preload/exports.map).
extern "C" {
__attribute__((visibility("default"))) laggard::nccl::abi::ProfilerV4 ncclProfiler_v4 = {
    "laggard", laggard::nccl::init_v4, laggard::nccl::start_v4, laggard::nccl::stop_event,
    laggard::nccl::record_state, laggard::nccl::finalize};
__attribute__((visibility("default"))) laggard::nccl::abi::ProfilerV5 ncclProfiler_v5 = {
    "laggard", laggard::nccl::init_v5, laggard::nccl::start_v5, laggard::nccl::stop_event,
    laggard::nccl::record_state, laggard::nccl::finalize};
__attribute__((visibility("default"))) laggard::nccl::abi::ProfilerV6 ncclProfiler_v6 = {
    "laggard", laggard::nccl::init_v6, laggard::nccl::start_v6, laggard::nccl::stop_event,
    laggard::nccl::record_state, laggard::nccl::finalize};
}
