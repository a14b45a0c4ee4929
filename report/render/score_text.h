// Scores in text output: two decimals, or as many more as it takes (up to 6) for the printed
// value to fall on the same side of the threshold as the score itself (0.7499 against 0.75
// prints 0.7499, never 0.75).
#pragma once

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace laggard::report {

inline std::string score_text(double score, double threshold) {
  for (int digits = 2; digits < 6; ++digits) {
    std::string s = fmt::format("{:.{}f}", score, digits);
    double shown = std::strtod(s.c_str(), nullptr);
    if ((shown < threshold) == (score < threshold)) return s;
  }
  return fmt::format("{:.6f}", score);
}

}  // namespace laggard::report
