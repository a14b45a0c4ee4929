// Environment access behind a function so config and rank detection are pure and testable.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace laggard {

using Env = std::function<const char*(const char* name)>;

// The real process environment.
Env process_env();

// A fixed environment, for tests.
Env map_env(const std::map<std::string, std::string>& vars);

// Strict integer parse of a whole value (trailing blanks allowed), within [min, max]. Shared by
// config, rank detection and the watchdog.
bool parse_int(const char* text, long long min, long long max, long long* out);

}  // namespace laggard
