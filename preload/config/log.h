// Diagnostics to stderr. One write(2) per line so lines from many ranks do not interleave,
// and no allocation, so it is usable from the flush thread and from fork/exit paths.
#pragma once

#include <atomic>

namespace laggard {

enum class LogLevel { quiet = 0, warn = 1, info = 2, debug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Prefix for every line, e.g. "rank 3"; empty until the rank is known.
void set_log_tag(const char* tag);

void log_warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace laggard

// Warns at most once per call site for the life of the process.
#define LAGGARD_WARN_ONCE(...)                                           \
  do {                                                                   \
    static std::atomic<bool> laggard_warned_{false};                     \
    if (!laggard_warned_.exchange(true, std::memory_order_relaxed))      \
      ::laggard::log_warn(__VA_ARGS__);                                  \
  } while (0)
