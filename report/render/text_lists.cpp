#include "text_lists.h"

#include <algorithm>

#include <fmt/format.h>

namespace laggard::report {

std::string rank_ranges(std::vector<int> ranks, size_t max_chars) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  size_t i = 0;
  if (!ranks.empty() && ranks.front() < 0) {
    out = "?";
    while (i < ranks.size() && ranks[i] < 0) ++i;
  }
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    std::string range = j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    if (!out.empty() && out.size() + 1 + range.size() > max_chars) {
      size_t left = ranks.size() - i;
      return out + fmt::format(",... (+{} more)", left);
    }
    out += (out.empty() ? "" : ",") + range;
    i = j + 1;
  }
  return out;
}

std::string counted_ranks(const std::vector<int>& ranks, size_t max_chars) {
  return fmt::format("{} rank{}: {}", ranks.size(), ranks.size() == 1 ? "" : "s", rank_ranges(ranks, max_chars));
}

size_t rows_shown(size_t rows, size_t top) { return rows <= std::max<size_t>(16, top) ? rows : top; }

std::string more_line(size_t total, size_t shown, const char* what) {
  if (total <= shown) return "";
  return fmt::format("  ... {} more {} (--top shows more; all are in --format json or csv)\n", total - shown, what);
}

}  // namespace laggard::report
