// ROOM control/ -- `laggard ctl` reaching a running job. The flush thread polls the run
// directory's control file; nothing here runs on application threads, which only read the
// pause epoch (app_thread/pause_state.h). The control file is input from any user who can
// write the run directory: parse it as hostile (bounded size, O_NOFOLLOW, O_NONBLOCK).
//
// Remote pause/resume of a running job (issue 15): the flush thread polls the run directory's
// control file (control_file.h) and flips g_pause_epoch (pause_state.h), which every capture
// callback reads. It remembers when capture was paused, so each window can say which part of
// it was paused (docs/schema.md, "Version 5: pause and resume"). Flush thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control_file.h"
#include "window.h"

namespace laggard {

class PauseControl {
 public:
  static constexpr int64_t kPollNs = 250'000'000;  // the file is read at most 4 times a second

  // run_dir: where the control file lives (the rank files' directory). epoch_offset_ns maps
  // the monotonic clock onto the epoch, as the recorder does.
  PauseControl(std::string run_dir, int64_t epoch_offset_ns);

  // Reads the control file when kPollNs have passed since the last read (always on the first
  // call, so a job started into a paused run starts paused), applies a new request, and
  // pauses again when an on-demand window is over. Returns whether capture was switched.
  // clock: read again after the file, for the switch's own time (reading the file takes hundreds of
  // µs on a busy machine; a pause stamped before it began before capture stopped, and a range that
  // ended in between was recorded inside the paused period). Null: now_mono_ns throughout (tests).
  bool poll(int64_t now_mono_ns, int64_t (*clock)() = nullptr);

  // Applies one request as if just read from the file (exposed for tests).
  bool apply(const ControlRequest& request, int64_t now_mono_ns);

  // The paused spans overlapping the window [start, end] (epoch ns), clipped to it; spans over
  // by `end` are forgotten afterwards. Called once per closed window.
  std::vector<PausedSpan> take_spans(int64_t window_start_ns, int64_t window_end_ns);

  bool paused() const;

 private:
  bool set_paused(bool paused, int64_t now_mono_ns, const char* command, uint64_t seq);
  void warn_refused(const std::string& why);

  struct Span {
    int64_t start_ns = 0, end_ns = 0;  // epoch; end 0: still paused
    std::string command;               // what paused: "pause", or "window" (its time was over)
    uint64_t seq = 0;
  };

  std::string run_dir_;
  int64_t epoch_offset_ns_;
  int64_t next_poll_ns_ = 0;
  bool polled_ = false;
  uint64_t applied_seq_ = 0;
  int64_t applied_issued_ns_ = -1;
  int64_t window_end_ns_ = 0;   // mono; 0: no on-demand window running
  uint64_t window_seq_ = 0;
  std::string last_refused_;    // warned once per distinct problem
  int warnings_ = 0;
  std::vector<Span> spans_;
};

}  // namespace laggard
