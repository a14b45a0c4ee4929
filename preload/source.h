// Capture sources beyond NVTX (CUPTI, the NCCL profiler plugin) plug into the lifecycle here,
// so lifecycle.cpp does not need to know them. A source registers its hooks from a static
// initializer in its own folder; all hooks run inside laggard's catch-all boundaries.
#pragma once

#include "window.h"

namespace laggard {

struct SourceHooks {
  const char* name;
  // After capture was activated for this process (flush thread running), on the activating
  // thread. May be null.
  void (*on_activate)() = nullptr;
  // On the flush thread, just before a window closes: move buffered records into `window`.
  // `final`: the process is exiting (last chance to flush device-side buffers). May be null.
  void (*on_window)(WindowSnapshot& window, bool final) = nullptr;
  // In a forked child: stop touching anything the parent's threads own. May be null.
  void (*on_fork_child)() = nullptr;
  // On the flush thread after every drain tick (about 20 times a second) and after each window
  // closes: poll for something to attach to, hand device buffers over early. May be null.
  void (*on_tick)() = nullptr;
};

// Call from static initialization only (before any thread could activate capture).
void register_source(const SourceHooks& hooks);

}  // namespace laggard
