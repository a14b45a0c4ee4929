#include "log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace laggard {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
char g_tag[64] = "";

void vlog(LogLevel level, const char* kind, const char* fmt, va_list ap) {
  if (static_cast<int>(level) > g_level.load(std::memory_order_relaxed)) return;
  char line[1024];
  int n = g_tag[0] ? std::snprintf(line, sizeof line, "laggard[%s]: %s", g_tag, kind)
                   : std::snprintf(line, sizeof line, "laggard: %s", kind);
  if (n < 0) return;
  size_t used = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
  int m = std::vsnprintf(line + used, sizeof line - used, fmt, ap);
  if (m > 0) used += static_cast<size_t>(m) < sizeof line - used ? static_cast<size_t>(m)
                                                                  : sizeof line - used - 1;
  if (used >= sizeof line - 1) used = sizeof line - 2;
  line[used++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line, used);
  (void)ignored;
}

}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void set_log_tag(const char* tag) {
  std::strncpy(g_tag, tag, sizeof g_tag - 1);
  g_tag[sizeof g_tag - 1] = '\0';
}

#define LAGGARD_DEFINE_LOG(fn, level, kind) \
  void fn(const char* fmt, ...) {           \
    va_list ap;                             \
    va_start(ap, fmt);                      \
    vlog(level, kind, fmt, ap);             \
    va_end(ap);                             \
  }
LAGGARD_DEFINE_LOG(log_warn, LogLevel::warn, "warning: ")
LAGGARD_DEFINE_LOG(log_info, LogLevel::info, "")
LAGGARD_DEFINE_LOG(log_debug, LogLevel::debug, "debug: ")
#undef LAGGARD_DEFINE_LOG

}  // namespace laggard
