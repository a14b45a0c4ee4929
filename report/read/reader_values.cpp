#include "reader_values.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace laggard::report::values {
namespace {

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

[[noreturn]] void bad(const nlohmann::json& v, const char* what, const char* why) {
  throw std::runtime_error(fmt::format("{}: {} {}", what, shown(v), why));
}

}  // namespace

int64_t integer(const nlohmann::json& v, int64_t lo, int64_t hi, const char* what) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) bad(v, what, fmt::format("is above {}", hi).c_str());
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    // Range first: converting a double outside int64 is undefined behaviour.
    if (!std::isfinite(d) || d != std::floor(d)) bad(v, what, "is not a whole number");
    if (d < double(lo) || d > double(hi)) bad(v, what, fmt::format("is outside {}..{}", lo, hi).c_str());
    x = static_cast<int64_t>(d);
  } else {
    bad(v, what, "is not a number");
  }
  if (x < lo) bad(v, what, lo == 0 ? "is negative" : fmt::format("is below {}", lo).c_str());
  if (x > hi) bad(v, what, fmt::format("is above {}", hi).c_str());
  return x;
}

uint64_t count(const nlohmann::json& v, const char* what) {
  return static_cast<uint64_t>(integer(v, 0, static_cast<int64_t>(kMaxCount), what));
}

int64_t time_ns(const nlohmann::json& v, const char* what) { return integer(v, 0, kMaxTimeNs, what); }

int64_t dur_ns(const nlohmann::json& v, const char* what) { return integer(v, 0, kMaxDurNs, what); }

int64_t offset_ns(const nlohmann::json& v, const char* what) {
  return integer(v, -kMaxDurNs, kMaxDurNs, what);
}

double seconds(const nlohmann::json& v, double hi, const char* what) {
  if (!v.is_number()) bad(v, what, "is not a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > hi) bad(v, what, fmt::format("is outside 0..{:g}", hi).c_str());
  return d;
}

uint64_t unsigned_or_zero(const nlohmann::json& object, const char* key, const char* what) {
  auto it = object.find(key);
  if (it == object.end()) return 0;
  if (!it->is_number_unsigned()) throw std::runtime_error(std::string(what) + ": not a count");
  return it->get<uint64_t>();
}

}  // namespace laggard::report::values
