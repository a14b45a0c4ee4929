// What other CUPTI clients in this process do to the process-wide activity API.
//
// CUPTI 13.0's activity API has one pair of buffer callbacks, one set of enabled kinds and one
// timestamp source per process (cupti_activity.h), shared by every client: when torch.profiler
// starts, Kineto calls cuptiActivityRegisterCallbacks with its own buffers (laggard then
// receives nothing), and when it stops it calls cuptiActivityDisable for the kinds it enabled
// (libkineto/src/CuptiActivityApi.cpp). It may also install a timestamp callback returning TSC
// cycles (libkineto/src/CuptiTimestamp.cpp) and never remove it.
//
// liblaggard.so, when LD_PRELOADed, exports those CUPTI functions (cupti_interpose.cpp): a
// client linked against libcupti calls laggard's copy, which notes the call here and forwards it
// unchanged to the real libcupti. GpuCapture reads these notes at every tick and window close:
// a take means its buffers were replaced, a release means the other client switched kernel
// capture off after taking, so laggard can take the activity API back without disturbing it.
// Clients that bind libcupti otherwise (static CUPTI, dlsym on their own handle) are not seen;
// the starved-window check in GpuCapture covers them.
//
// Per-subscriber activity buffers: CUDA 13.0's headers (the ones laggard builds against) have
// none; NVIDIA's CUPTI 13.4 guide ("Legacy Initialization (CUDA 13.2 and earlier)") says CUPTI
// 13.2 and older, or drivers before r610, limit activity tracing to one subscriber, and the
// cupti-python 13.5 release notes list per-subscriber ("v2") Activity APIs. Using them needs
// those headers; until then this watch is how laggard shares the process-wide API.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

namespace laggard::cupti {

struct ForeignActivity {
  uint64_t takes = 0;           // foreign cuptiActivityRegisterCallbacks calls
  uint64_t releases = 0;        // foreign cuptiActivityDisable(CONCURRENT_KERNEL) after a take
  uint64_t timestamp_callbacks = 0;  // foreign cuptiActivityRegisterTimestampCallback calls
  std::string taker;            // the library that last registered buffers ("" unknown)
  std::string timestamp_owner;  // the library that installed the timestamp callback
  bool holding = false;         // the last taker has not switched kernel records off since
};

// A consistent copy of the notes.
ForeignActivity foreign_activity();

// Called by the interposers (and by tests standing in for them). `caller`: the calling
// library's file name, or null.
void note_register_callbacks(const char* caller);
void note_disable(CUpti_ActivityKind kind, const char* caller);
void note_timestamp_callback(const char* caller);

// Forgets every note (tests).
void reset_foreign_activity();

}  // namespace laggard::cupti
