#include "progress.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace laggard::cli {

constexpr int kBarWidth = 30;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

ProgressBar::ProgressBar(std::ostream& out, bool terminal, std::chrono::milliseconds delay)
    : out_(out), terminal_(terminal), start_(Clock::now()), delay_(delay) {}

void ProgressBar::update(const std::string& stage, double fraction, const std::string& detail) {
  if (!terminal_) return;
  std::lock_guard lock(mutex_);
  Clock::time_point now = Clock::now();
  if (now - start_ < delay_) return;                       // short merges show nothing
  if (drawn_ && now - last_draw_ < kRedrawEvery && fraction < 1) return;
  last_draw_ = now;
  draw(stage, fraction, detail);
}

void ProgressBar::draw(const std::string& stage, double fraction, const std::string& detail) {
  std::string line = "\rlaggard report: " + stage;
  if (fraction >= 0) {
    int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kBarWidth);
    line += fmt::format(" [{}{}] {:3.0f}%", std::string(filled, '#'), std::string(kBarWidth - filled, ' '),
                        std::clamp(fraction, 0.0, 1.0) * 100);
  }
  if (!detail.empty()) line += " " + detail;
  line += "\x1b[K";  // erase what a longer earlier line left
  out_ << line << std::flush;
  drawn_ = true;
}

void ProgressBar::clear() {
  std::lock_guard lock(mutex_);
  if (!drawn_) return;
  out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace laggard::cli
