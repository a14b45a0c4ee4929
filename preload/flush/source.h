// Capture sources beyond NVTX (CUPTI, the NCCL profiler plugin) plug into the lifecycle here,
// so lifecycle.cpp does not need to know them. A source registers its hooks from a static
// initializer in its own folder; all hooks run inside laggard's catch-all boundaries.
#pragma once

#include <string>

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
  // On the flush thread when `laggard ctl` paused (true) or resumed (false) capture; the flag
  // itself is pause_state.h's, read by callbacks. May be null.
  void (*on_pause)(bool paused) = nullptr;
};

struct FileInfo;
// While capture is active: who this process is and its run directory (for sources that write
// files of their own, such as hang reports). Null / "" otherwise.
const FileInfo* active_file_info();
std::string active_run_dir();

// Call from static initialization only (before any thread could activate capture).
void register_source(const SourceHooks& hooks);

}  // namespace laggard
