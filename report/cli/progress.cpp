#include "progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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

namespace {

struct ProcessUsage {
  double cpu_s;
  long faults;       // minor page faults so far
  long peak_rss_kb;  // so far
};

ProcessUsage process_usage() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return {s(u.ru_utime) + s(u.ru_stime), u.ru_minflt, u.ru_maxrss};
}

}  // namespace

StageTimer::StageTimer(std::ostream& out) : out_(out) {
  const char* v = std::getenv("LAGGARD_STAGE_TIMES");
  on_ = v && *v && std::strcmp(v, "0") != 0;
}

void StageTimer::next(const std::string& name) {
  if (!on_) return;
  const auto now = ProgressBar::Clock::now();
  const ProcessUsage u = process_usage();
  if (!stage_.empty())
    out_ << fmt::format("laggard report: stage {}: {:.3f} s wall, {:.3f} s CPU, {} page faults, peak {} MiB\n", stage_,
                        std::chrono::duration<double>(now - wall_).count(), u.cpu_s - cpu_s_, u.faults - faults_,
                        u.peak_rss_kb / 1024);
  stage_ = name;
  wall_ = now;
  cpu_s_ = u.cpu_s;
  faults_ = u.faults;
}

}  // namespace laggard::cli
