#include "env.h"

#include <cerrno>
#include <cstdlib>
#include <memory>

namespace laggard {

Env process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

bool parse_int(const char* text, long long min, long long max, long long* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (errno != 0 || !end || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

Env map_env(const std::map<std::string, std::string>& vars) {
  auto copy = std::make_shared<std::map<std::string, std::string>>(vars);
  return [copy](const char* name) -> const char* {
    auto it = copy->find(name);
    return it == copy->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace laggard
