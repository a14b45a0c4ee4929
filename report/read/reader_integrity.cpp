#include "reader_integrity.h"

#include <algorithm>

#include <fmt/format.h>

namespace laggard::report {

uint64_t occurrence_count(const RankData& r) {
  uint64_t n = 0;
  for (const auto& w : r.windows)
    for (const auto& s : w.sections) n += s.count;
  return n;
}

namespace {

bool started_by_another_writer(const RankData& p, const std::vector<RankData>& procs) {
  if (p.ppid <= 0) return false;  // schema < 4: unknown
  return std::any_of(procs.begin(), procs.end(), [&](const RankData& q) {
    return &q != &p && q.pid == p.ppid && q.host == p.host;
  });
}

// "1234", or "1234 (image 0a1b2c3d)" when another file set of the same pid is listed too.
std::string process_label(const RankData& p, const std::vector<RankData>& procs) {
  bool shared_pid = std::count_if(procs.begin(), procs.end(), [&](const RankData& q) { return q.pid == p.pid; }) > 1;
  return shared_pid && !p.image.empty() ? fmt::format("{} (image {})", p.pid, p.image) : std::to_string(p.pid);
}

std::string join_pids(const std::vector<RankData>& procs, bool children) {
  std::string out;
  for (const auto& p : procs)
    if (started_by_another_writer(p, procs) == children) out += (out.empty() ? "" : ", ") + process_label(p, procs);
  return out;
}

// Two images of one process: the same pid, host and kernel start time (an exec keeps all three).
bool exec_images(const RankData& a, const RankData& b) {
  return a.pid == b.pid && a.host == b.host && a.started_ticks != 0 && a.started_ticks == b.started_ticks &&
         a.image != b.image;
}

// "3-7, 12" for the sorted missing indexes; at most `max_runs` runs, then "...".
std::string index_runs(const std::vector<uint64_t>& missing, size_t max_runs) {
  std::string out;
  size_t runs = 0;
  for (size_t i = 0; i < missing.size();) {
    size_t j = i;
    while (j + 1 < missing.size() && missing[j + 1] == missing[j] + 1) ++j;
    if (runs++ == max_runs) return out + ", ...";
    out += (out.empty() ? "" : ", ") +
           (i == j ? std::to_string(missing[i]) : fmt::format("{}-{}", missing[i], missing[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace

void choose_rank_process(std::vector<RankData>& procs, std::vector<Problem>& problems) {
  if (procs.size() < 2) return;
  std::vector<bool> child(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) child[i] = started_by_another_writer(procs[i], procs);
  size_t best = procs.size();
  for (size_t i = 0; i < procs.size(); ++i)
    if (!child[i] && (best == procs.size() || occurrence_count(procs[i]) > occurrence_count(procs[best]))) best = i;
  if (best == procs.size()) best = 0;  // a cycle of pids (reused across hosts' reboots): keep the first
  bool had_children = std::find(child.begin(), child.end(), true) != child.end();
  bool execs = std::any_of(procs.begin(), procs.end(), [&](const RankData& p) {
    return std::any_of(procs.begin(), procs.end(), [&](const RankData& q) { return exec_images(p, q); });
  });
  int rank = procs[best].rank;
  std::string roots = join_pids(procs, false), children = join_pids(procs, true);
  std::string why = had_children
                        ? fmt::format("the rank's own process; pid(s) {} were started by another writer of this rank "
                                      "(an exec'd child inheriting LD_PRELOAD and RANK) and are set aside",
                                      children)
                        : "which recorded the most";
  if (execs) why += "; images of one pid are a process that exec()ed itself (its other images' files are kept, not merged)";
  std::string all = roots + (children.empty() ? "" : (roots.empty() ? "" : ", ") + children);
  std::rotate(procs.begin(), procs.begin() + static_cast<long>(best), procs.begin() + static_cast<long>(best) + 1);
  problems.push_back({"duplicate_rank", rank, "",
                      fmt::format("rank {} was written by {} processes (pids {}); using pid {}, {}", rank,
                                  procs.size(), all, process_label(procs.front(), procs), why)});
}

void check_window_continuity(const RankData& rank, std::vector<Problem>& problems) {
  std::vector<uint64_t> missing;
  uint64_t expected = 0;
  for (const CaptureWindow& w : rank.windows) {
    // Bounded: a corrupt index far ahead is not a reason to list billions of numbers.
    for (uint64_t i = expected; i < w.index && missing.size() < 100000; ++i) missing.push_back(i);
    expected = std::max(expected, w.index + 1);
  }
  if (missing.empty() && rank.windows_lost == 0) return;
  std::string msg = fmt::format("rank {} (pid {}) is missing", rank.rank, rank.pid);
  if (!missing.empty())
    msg += fmt::format(" {} window(s): {} of {} flushes", missing.size(), index_runs(missing, 10), expected);
  if (rank.windows_lost)
    msg += fmt::format("{} {} window(s) its writer could not write and dropped", missing.empty() ? "" : ";",
                       rank.windows_lost);
  msg += " (full or failing file system, or removed files); sections and scores cover only the rest";
  problems.push_back({"missing_windows", rank.rank, "", msg});
}

}  // namespace laggard::report
