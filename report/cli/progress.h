// A one-line progress bar on stderr for `laggard report` merges that take longer than a second.
// Drawn only on a terminal (never into a pipe, a file or the JSON on stdout), redrawn at most
// ten times a second, and wiped before the report is written.
#pragma once

#include <chrono>
#include <mutex>
#include <ostream>
#include <string>

namespace laggard::cli {

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;
  // `terminal`: whether `out` is a terminal (isatty); nothing is drawn otherwise.
  ProgressBar(std::ostream& out, bool terminal, std::chrono::milliseconds delay = std::chrono::seconds(1));
  ~ProgressBar() { clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `fraction` in [0, 1], or < 0 when unknown (no bar, only the stage). Thread-safe.
  void update(const std::string& stage, double fraction, const std::string& detail = "");
  // Wipes the line, if one was drawn.
  void clear();
  // Whether anything can be drawn (see update).
  bool terminal() const { return terminal_; }

 private:
  void draw(const std::string& stage, double fraction, const std::string& detail);

  std::ostream& out_;
  bool terminal_;
  Clock::time_point start_, last_draw_{};
  std::chrono::milliseconds delay_;
  bool drawn_ = false;
  std::mutex mutex_;
};

// Whether stderr is a terminal.
bool stderr_is_terminal();

// LAGGARD_STAGE_TIMES=1: one line per stage of `laggard report` on stderr, with its wall time and
// the CPU time (user + sys, all threads) the process spent in it, for benchmarks (bench/scale).
class StageTimer {
 public:
  // Off unless LAGGARD_STAGE_TIMES is set and not "0". Each stage's wall and CPU time, the page
  // faults it took (fresh memory: what a VM charges most for, docs/memory.md) and the process' peak
  // memory when it ended.
  explicit StageTimer(std::ostream& out);
  ~StageTimer() { next(""); }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  // Ends the stage running (printing its times) and starts `name` ("": none).
  void next(const std::string& name);

 private:
  std::ostream& out_;
  bool on_ = false;
  std::string stage_;
  ProgressBar::Clock::time_point wall_{};
  double cpu_s_ = 0;
  long faults_ = 0;  // the process' minor page faults when the stage began
};

}  // namespace laggard::cli
