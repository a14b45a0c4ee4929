// One clock for everything recorded in-process: CLOCK_MONOTONIC (immune to NTP steps, read
// through the vDSO without a syscall), mapped to epoch nanoseconds with an offset measured once.
#pragma once

#include <time.h>

#include <cstdint>

namespace laggard {

inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few bracketed samples.
int64_t measure_epoch_offset_ns();

}  // namespace laggard
