// Time intervals and their unions: the arithmetic of "how long was the GPU busy with X".
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace laggard::report {

struct Interval {
  int64_t start, end;  // [start, end)
};

// Sorted, non-overlapping cover of the input.
inline std::vector<Interval> merge(std::vector<Interval> v) {
  // One stream's work comes in start order already: the union does not depend on how ties sort.
  auto by_start = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.start) continue;
    if (!out.empty() && i.start <= out.back().end) out.back().end = std::max(out.back().end, i.end);
    else out.push_back(i);
  }
  return out;
}

inline int64_t length(const std::vector<Interval>& merged) {
  int64_t n = 0;
  for (const Interval& i : merged) n += i.end - i.start;
  return n;
}

// Both inputs merged (sorted, disjoint).
inline std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t s = std::max(a[i].start, b[j].start), e = std::min(a[i].end, b[j].end);
    if (s < e) out.push_back({s, e});
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return out;
}

// a minus b, both merged.
inline std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (Interval cur : a) {
    while (j < b.size() && b[j].end <= cur.start) ++j;
    size_t k = j;
    while (k < b.size() && b[k].start < cur.end) {
      if (b[k].start > cur.start) out.push_back({cur.start, b[k].start});
      cur.start = std::max(cur.start, b[k].end);
      ++k;
    }
    if (cur.start < cur.end) out.push_back(cur);
  }
  return out;
}

// Clip merged intervals to [lo, hi).
inline std::vector<Interval> clip(const std::vector<Interval>& a, int64_t lo, int64_t hi) {
  return intersect(a, {{lo, hi}});
}

}  // namespace laggard::report
