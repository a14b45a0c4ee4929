#include "pause_control.h"

#include <algorithm>

#include "clock.h"
#include "log.h"
#include "pause_state.h"
#include "private_fds.h"

namespace laggard {

std::atomic<uint32_t> g_pause_epoch{0};

namespace {
constexpr int kMaxWarnings = 5;  // a file rewritten with garbage every second must not flood the log
}

PauseControl::PauseControl(std::string run_dir, int64_t epoch_offset_ns)
    : run_dir_(std::move(run_dir)), epoch_offset_ns_(epoch_offset_ns) {}

bool PauseControl::paused() const { return !spans_.empty() && spans_.back().end_ns == 0; }

bool PauseControl::set_paused(bool pause, int64_t now_mono_ns, const char* command, uint64_t seq) {
  if (pause == paused()) return false;
  int64_t now = now_mono_ns + epoch_offset_ns_;
  if (pause) {
    // The span starts before the flag flips: a range that reads its clock after the flip
    // cannot start before the span.
    spans_.push_back(Span{now, 0, command, seq});
    g_pause_epoch.fetch_add(1, std::memory_order_release);
  } else {
    g_pause_epoch.fetch_add(1, std::memory_order_release);
    spans_.back().end_ns = std::max(now, spans_.back().start_ns);
  }
  return true;
}

void PauseControl::warn_refused(const std::string& why) {
  if (why == last_refused_) return;
  last_refused_ = why;
  if (warnings_++ < kMaxWarnings)
    log_warn("ignoring the control file %s/%s: %s; capture stays %s", run_dir_.c_str(), kControlFileName,
             why.c_str(), paused() ? "paused" : "on");
}

bool PauseControl::apply(const ControlRequest& r, int64_t now_mono_ns) {
  applied_seq_ = r.seq;
  applied_issued_ns_ = r.issued_ns;
  switch (r.command) {
    case ControlCommand::pause:
      window_end_ns_ = 0;
      return set_paused(true, now_mono_ns, "pause", r.seq);
    case ControlCommand::resume:
      window_end_ns_ = 0;
      return set_paused(false, now_mono_ns, "resume", r.seq);
    case ControlCommand::window: {
      int64_t left = r.window_ns;
      if (!polled_) {
        // Found at start (a rank that joined late, or a restart): only what is left of the
        // window counts, by the CLI's clock; a window already over leaves capture paused.
        left = r.issued_ns + r.window_ns - realtime_ns();
        if (left <= 0) return set_paused(true, now_mono_ns, "window", r.seq);
      }
      window_end_ns_ = now_mono_ns + std::min(left, r.window_ns);
      window_seq_ = r.seq;
      return set_paused(false, now_mono_ns, "window", r.seq);
    }
  }
  return false;
}

bool PauseControl::poll(int64_t now_mono_ns, int64_t (*clock)()) {
  bool changed = false;
  if (window_end_ns_ != 0 && now_mono_ns >= window_end_ns_) {
    window_end_ns_ = 0;
    changed = set_paused(true, now_mono_ns, "window", window_seq_);
  }
  if (polled_ && now_mono_ns < next_poll_ns_) return changed;
  next_poll_ns_ = now_mono_ns + kPollNs;
  // On the private-table thread (private_fds.h): read 4 times a second, the file must not take
  // a descriptor number the application is about to get.
  ControlRead read;
  run_with_private_fds([&] { read = read_control_file(run_dir_); });
  bool first = !polled_;
  if (read.status == ControlRead::Status::refused) {
    warn_refused(read.error);
  } else if (read.status == ControlRead::Status::ok) {
    ControlParse p = parse_control(read.text);
    if (!p.request) {
      warn_refused(p.error);
    } else if (p.request->seq != applied_seq_ || p.request->issued_ns != applied_issued_ns_) {
      last_refused_.clear();
      // At start, a resume has nothing to undo and a pause found there pauses from now.
      bool switched = apply(*p.request, clock ? std::max(now_mono_ns, clock()) : now_mono_ns);
      changed = changed || switched;
      if (switched)
        log_info("capture %s by `laggard ctl %s` (seq %llu)%s", paused() ? "paused" : "resumed",
                 control_command_name(p.request->command), static_cast<unsigned long long>(p.request->seq),
                 first ? ", found at start" : "");
    }
  }
  polled_ = true;
  return changed;
}

std::vector<PausedSpan> PauseControl::take_spans(int64_t window_start_ns, int64_t window_end_ns) {
  std::vector<PausedSpan> out;
  for (const Span& s : spans_) {
    int64_t start = std::max(s.start_ns, window_start_ns);
    int64_t end = s.end_ns == 0 ? window_end_ns : std::min(s.end_ns, window_end_ns);
    if (end < start) continue;
    if (end == start && s.end_ns != 0) continue;  // ended exactly where the window began
    out.push_back(PausedSpan{start, end, s.command, s.seq, s.end_ns == 0});
  }
  std::erase_if(spans_, [&](const Span& s) { return s.end_ns != 0 && s.end_ns <= window_end_ns; });
  return out;
}

}  // namespace laggard
