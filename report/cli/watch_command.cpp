#include "watch_command.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "metrics_server.h"
#include "render_prometheus.h"
#include "render_watch.h"
#include "watch_state.h"

namespace laggard::cli {
namespace {

namespace fs = std::filesystem;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Names, sizes and modification times of the rank files under dir (and its run directories):
// when it has not changed since the last read there is nothing new to read.
std::string rank_files_fingerprint(const std::string& dir) {
  std::string print;
  std::error_code ec;
  auto add_dir = [&](const fs::path& d, auto&& self, int depth) -> void {
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (depth == 0 && it->is_directory(ec)) self(it->path(), self, 1);
      else if (name.rfind("rank", 0) == 0 && name.size() > 5 && (name.ends_with(".json") || name.ends_with(".lgr"))) {
        auto size = it->file_size(ec);
        auto mtime = it->last_write_time(ec).time_since_epoch().count();
        print += fmt::format("{}\t{}\t{}\n", it->path().string(), size, mtime);
      }
    }
  };
  add_dir(dir, add_dir, 0);
  return print;
}

// SIGINT and SIGTERM are blocked in every thread and taken with sigtimedwait() between refreshes:
// no handler runs in the middle of drawing, and the server threads never see them.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  // Waits up to seconds; true when a stop signal came.
  bool wait(double seconds) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      auto left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      timespec ts{static_cast<time_t>(left), static_cast<long>((left - std::floor(left)) * 1e9)};
      int sig = sigtimedwait(&set_, nullptr, &ts);
      if (sig == SIGINT || sig == SIGTERM) return true;
      if (sig < 0 && errno != EINTR && errno != EAGAIN) return false;
    }
  }

 private:
  sigset_t set_, old_;
};

// On a terminal: the alternate screen, the cursor hidden, and both restored however we leave.
class Screen {
 public:
  explicit Screen(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {
    if (terminal_) out_ << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~Screen() {
    if (terminal_) out_ << "\x1b[?25h\x1b[?1049l" << last_ << std::flush;  // the last view stays visible
  }
  void show(const std::string& view, int64_t at_ns) {
    if (terminal_) {
      out_ << "\x1b[H\x1b[2J" << view << std::flush;
    } else {
      std::time_t t = static_cast<std::time_t>(at_ns / 1'000'000'000);
      std::tm tm{};
      localtime_r(&t, &tm);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
      out_ << "--- " << stamp << " ---\n" << view << '\n' << std::flush;
    }
    last_ = view;
  }

 private:
  std::ostream& out_;
  bool terminal_;
  std::string last_;
};

size_t table_rows(const WatchOptions& o, bool terminal) {
  if (o.top) return o.top;
  winsize ws{};
  if (!terminal || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0) return 20;
  // Header, stragglers, newest window and rank tables share the screen: a third each.
  return std::max<size_t>(3, (ws.ws_row > 14 ? ws.ws_row - 14 : 0) / 3);
}

struct Refresh {
  report::WatchState state;
  double read_s = 0;
  int64_t read_at_ns = 0;
};

Refresh read_and_score(const WatchOptions& o) {
  Refresh r;
  auto t0 = std::chrono::steady_clock::now();
  try {
    report::RunModel model = report::read_run(o.dir, o.read);
    r.state = report::summarize_for_watch(model, o.scores, o.step_section);
  } catch (const std::exception& e) {  // no rank files yet (or none readable): wait for them
    r.state = {};
    r.state.dir = o.dir;
    r.state.waiting = e.what();
  }
  r.read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.read_at_ns = now_ns();
  return r;
}

}  // namespace

int watch_command(const WatchOptions& o, std::ostream& out, std::ostream& err) {
  StopSignals signals;  // before the server starts its threads, so they inherit the blocked mask
  std::unique_ptr<MetricsServer> server;
  if (!o.serve.empty()) {
    try {
      server = std::make_unique<MetricsServer>(parse_endpoint(o.serve), report::kPrometheusContentType);
    } catch (const std::exception& e) {
      err << "laggard watch: --serve: " << e.what() << '\n';
      return 2;
    }
    err << "laggard watch: serving " << server->url() << '\n';
  }
  const bool terminal = &out == &std::cout && isatty(STDOUT_FILENO);
  Screen screen(out, terminal);
  std::string last_print;
  Refresh last;
  for (int n = 0; o.count == 0 || n < o.count; ++n) {
    std::string print = rank_files_fingerprint(o.dir);
    if (n == 0 || print != last_print || !last.state.waiting.empty()) last = read_and_score(o);
    last_print = print;
    try {
      if (server) server->publish(report::render_prometheus(last.state, last.read_s, last.read_at_ns, o.max_section_series));
      report::WatchViewOptions view{table_rows(o, terminal), o.interval_s, server ? server->url() : "", now_ns()};
      std::ostringstream text;
      report::render_watch(last.state, view, text);
      screen.show(text.str(), view.now_ns);
    } catch (const std::exception& e) {  // a bad refresh is skipped, the watch goes on
      err << "laggard watch: " << e.what() << '\n';
    }
    if (o.count && n + 1 >= o.count) break;
    if (signals.wait(o.interval_s)) break;
  }
  return 0;
}

}  // namespace laggard::cli
