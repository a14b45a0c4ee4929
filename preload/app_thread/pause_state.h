// The switch `laggard ctl` flips in a running job (docs/report.md, "Pausing capture"): read by
// every capture callback, written only by the flush thread (pause_control.cpp).
#pragma once

#include <atomic>
#include <cstdint>

namespace laggard {

// Bumped on every pause and every resume; odd while paused. A range whose push and pop see
// different values had capture switched off during it and is not recorded.
extern std::atomic<uint32_t> g_pause_epoch;

// One relaxed load: what a callback pays while capture is paused.
inline uint32_t pause_epoch() { return g_pause_epoch.load(std::memory_order_relaxed); }
inline bool paused_epoch(uint32_t epoch) { return (epoch & 1u) != 0; }
inline bool capture_paused() { return paused_epoch(pause_epoch()); }

}  // namespace laggard
