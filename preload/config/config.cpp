#include "config.h"

#include "section_filter.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <strings.h>

namespace laggard {

namespace {

bool parse_double(const char* text, double* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (errno != 0 || !end || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool is_any(const char* v, std::initializer_list<const char*> words) {
  for (const char* w : words)
    if (strcasecmp(v, w) == 0) return true;
  return false;
}

std::string bad(const char* var, const char* value, const std::string& expected,
                const std::string& fallback) {
  return std::string(var) + "='" + value + "' is not valid (" + expected + "); using " + fallback;
}

}  // namespace

ConfigResult parse_config(const Env& env) {
  ConfigResult r;
  Config& c = r.config;

  if (const char* v = env("LAGGARD_ENABLE")) {
    if (is_any(v, {"0", "false", "no", "off"})) c.enabled = false;
    else if (!is_any(v, {"1", "true", "yes", "on", ""}))
      r.warnings.push_back(bad("LAGGARD_ENABLE", v, "expected 0 or 1", "1"));
  }

  if (const char* v = env("LAGGARD_OUT")) {
    if (*v) c.out_dir = v;
    else r.warnings.push_back(bad("LAGGARD_OUT", v, "empty path", "'" + c.out_dir + "'"));
  }

  if (const char* v = env("LAGGARD_SECTIONS"); v && *v) {
    std::string error;
    if (SectionFilter::compile(v, &error)) c.sections = v;
    else r.warnings.push_back(bad("LAGGARD_SECTIONS", v, "regex: " + error, "all sections"));
  }

  if (const char* v = env("LAGGARD_FLUSH_S")) {
    double s = 0;
    if (parse_double(v, &s) && s >= 0.05 && s <= 86400) c.flush_s = s;
    else r.warnings.push_back(bad("LAGGARD_FLUSH_S", v, "seconds between 0.05 and 86400", "10"));
  }

  if (const char* v = env("LAGGARD_LOG")) {
    if (is_any(v, {"quiet", "off", "0"})) c.log = LogLevel::quiet;
    else if (is_any(v, {"warn", "warning"})) c.log = LogLevel::warn;
    else if (is_any(v, {"info", "1"})) c.log = LogLevel::info;
    else if (is_any(v, {"debug", "2"})) c.log = LogLevel::debug;
    else r.warnings.push_back(bad("LAGGARD_LOG", v, "quiet, warn, info or debug", "warn"));
  }

  if (const char* v = env("LAGGARD_WINDOWS_PER_FILE")) {
    long long n = 0;
    if (parse_int(v, 1, 100000, &n)) c.windows_per_file = static_cast<int>(n);
    else r.warnings.push_back(bad("LAGGARD_WINDOWS_PER_FILE", v, "integer >= 1", "30"));
  }

  if (const char* v = env("LAGGARD_FILE_FORMAT")) {
    if (is_any(v, {"json"})) c.binary_files = false;
    else if (!is_any(v, {"binary", "bin", ""})) r.warnings.push_back(bad("LAGGARD_FILE_FORMAT", v, "binary or json", "binary"));
  }

  if (const char* v = env("LAGGARD_MAX_OCCURRENCES")) {
    long long n = 0;
    if (parse_int(v, 1, 10000000, &n)) c.max_occurrences = static_cast<int>(n);
    else r.warnings.push_back(bad("LAGGARD_MAX_OCCURRENCES", v, "integer >= 1", "2048"));
  }

  if (const char* v = env("LAGGARD_CUPTI")) {
    if (is_any(v, {"0", "false", "no", "off"})) c.cupti = false;
    else if (!is_any(v, {"1", "true", "yes", "on", ""}))
      r.warnings.push_back(bad("LAGGARD_CUPTI", v, "expected 0 or 1", "1"));
  }

  if (const char* v = env("LAGGARD_PROFILING_INTERVAL")) {
    long long n = 0;
    if (parse_int(v, 1, 1000000, &n)) c.profiling_interval = static_cast<int>(n);
    else r.warnings.push_back(bad("LAGGARD_PROFILING_INTERVAL", v, "integer >= 1", "1"));
  }

  if (const char* v = env("LAGGARD_CUPTI_PATH"); v && *v) c.cupti_path = v;

  if (const char* v = env("LAGGARD_NCCL")) {
    if (is_any(v, {"0", "false", "no", "off"})) c.nccl = false;
    else if (!is_any(v, {"1", "true", "yes", "on", ""}))
      r.warnings.push_back(bad("LAGGARD_NCCL", v, "expected 0 or 1", "1"));
  }

  if (const char* v = env("LAGGARD_NCCL_KERNEL_EVENTS")) {
    if (is_any(v, {"0", "false", "no", "off"})) c.nccl_kernel_events = 0;
    else if (is_any(v, {"1", "true", "yes", "on"})) c.nccl_kernel_events = 1;
    else if (!is_any(v, {"auto", ""}))
      r.warnings.push_back(bad("LAGGARD_NCCL_KERNEL_EVENTS", v, "expected auto, 0 or 1", "auto"));
  }
  if (const char* v = env("LAGGARD_EXIT_WAIT_S")) {
    double s = 0;
    if (parse_double(v, &s) && s >= 0 && s <= 60) c.exit_wait_s = s;
    else r.warnings.push_back(bad("LAGGARD_EXIT_WAIT_S", v, "seconds between 0 and 60", "1"));
  }
  if (const char* v = env("LAGGARD_CLOCK")) {
    if (is_any(v, {"tsc"})) c.clock = ClockChoice::tsc;
    else if (is_any(v, {"monotonic"})) c.clock = ClockChoice::monotonic;
    else if (!is_any(v, {"auto", ""}))
      r.warnings.push_back(bad("LAGGARD_CLOCK", v, "expected auto, tsc or monotonic", "auto"));
  }
  return r;
}

}  // namespace laggard
