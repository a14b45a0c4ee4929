#include "env.h"

#include <cstdlib>
#include <memory>

namespace laggard {

Env process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Env map_env(const std::map<std::string, std::string>& vars) {
  auto copy = std::make_shared<std::map<std::string, std::string>>(vars);
  return [copy](const char* name) -> const char* {
    auto it = copy->find(name);
    return it == copy->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace laggard
