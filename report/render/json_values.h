// Values the JSON renderers write the same way: an absent score is null, never 0 or NaN.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace laggard::report {

inline nlohmann::json json_or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace laggard::report
