#include "reader_checks.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "reader_parallel.h"
#include "reader_values.h"

namespace laggard::report {
namespace {

constexpr double kNsPerDay = 86400e9;
constexpr int64_t kMinClockSlackNs = 60'000'000'000;  // starts this close never count as disagreeing
constexpr size_t kMissingListedEach = 32;

// Lower median of a non-empty vector.
template <class T>
T lower_median(std::vector<T> v) {
  std::nth_element(v.begin(), v.begin() + (v.size() - 1) / 2, v.end());
  return v[(v.size() - 1) / 2];
}

// t + d, held inside int64 (times and offsets are bounded, their sums need not be).
int64_t shifted(int64_t t, int64_t d) {
  int64_t out;
  if (__builtin_add_overflow(t, d, &out)) return d > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

void shift_rank(RankData& r, int64_t d) {
  auto shift = [d](int64_t& t) { t = shifted(t, d); };
  auto shift_known = [d](int64_t& t) { if (t) t = shifted(t, d); };  // 0: unknown, stays unknown
  auto shift_span = [&](auto& a) {  // GpuActivity or GpuSpan
    shift(a.start_ns);
    shift(a.end_ns);
    shift_known(a.api_start_ns);
    shift_known(a.api_end_ns);
  };
  shift_known(r.process_start_ns);
  shift_known(r.data_end_ns);
  for (SpanChunk& chunk : r.span_chunks) {  // unreferenced spans too: harmless, and one pass
    chunk.shift(d, shift_span);
    chunk.drop_label_lookups();  // what a record packed again looked its label up in
  }
  for (CaptureWindow& w : r.windows) {
    shift(w.start_ns);
    shift(w.end_ns);
    for (SectionWindow& s : w.sections)
      for (Occurrence& o : s.occurrences) shift(o.start_ns);
    for (PausedPeriod& p : w.paused) {
      shift(p.start_ns);
      shift(p.end_ns);
    }
    for (GpuActivity& a : w.gpu) shift_span(a);
    for (GpuSpan& a : w.gpu_spans) shift_span(a);
    for (Collective& c : w.collectives) {
      shift(c.upload_start_ns);
      shift_known(c.upload_end_ns);
      shift_known(c.chan_host_start_ns);
      shift_known(c.chan_host_stop_ns);
      shift_known(c.gpu_start_ns);
      shift_known(c.gpu_end_ns);
    }
  }
}

std::string duration_text(double ns) {
  ns = std::fabs(ns);
  if (ns >= kNsPerDay) return fmt::format("{:.1f} days", ns / kNsPerDay);
  if (ns >= 3600e9) return fmt::format("{:.1f} h", ns / 3600e9);
  return fmt::format("{:.1f} s", ns / 1e9);
}

}  // namespace

// A window longer than any duration a file may hold (a flush interval is at most a day; 104 days
// covers a process stopped for months) has a start or end from another clock or a corrupt file:
// left out, with any number of windows (a fuzzed file held one from 1970 to 2024).
void drop_windows_too_long(RankData& r, std::vector<Problem>& problems) {
  const size_t before = r.windows.size();
  int64_t longest = 0;
  std::erase_if(r.windows, [&](const CaptureWindow& w) {
    const int64_t span = w.end_ns - w.start_ns;  // both within 1970..2096 (reader_values.h): no overflow
    if (span <= values::kMaxDurNs) return false;
    longest = std::max(longest, span);
    return true;
  });
  if (size_t n = before - r.windows.size())
    problems.push_back({"window_time_outlier", r.rank, "",
                        fmt::format("rank {}: {} of {} windows last up to {} (clock stepped or file corrupt); left out",
                                    r.rank, n, before, duration_text(double(longest)))});
}

void drop_window_time_outliers(RankData& r, std::vector<Problem>& problems) {
  drop_windows_too_long(r, problems);
  if (r.windows.size() < 3) return;  // too few to tell which side is wrong
  // Window i starts about index_i flush intervals after the process's first window: its anchor
  // (start - index * flush) is the same for all windows up to suspensions and late flushes.
  const double flush_ns = (r.flush_s > 0 ? r.flush_s : 10.0) * 1e9;
  auto anchor = [&](const CaptureWindow& w) { return double(w.start_ns) - double(w.index) * flush_ns; };
  std::vector<double> anchors;
  for (const CaptureWindow& w : r.windows) anchors.push_back(anchor(w));
  const double center = lower_median(anchors);
  const double expected_span = double(r.windows.back().index - r.windows.front().index + 1) * flush_ns;
  const double tolerance = std::max(kNsPerDay, 2 * expected_span);
  size_t before = r.windows.size();
  double worst = 0;
  std::erase_if(r.windows, [&](const CaptureWindow& w) {
    double off = anchor(w) - center;
    if (std::fabs(off) <= tolerance) return false;
    worst = std::max(worst, std::fabs(off));
    return true;
  });
  if (size_t n = before - r.windows.size())
    problems.push_back({"window_time_outlier", r.rank, "",
                        fmt::format("rank {}: {} of {} windows lie up to {} away from the rank's other windows "
                                    "(clock stepped or file corrupt); left out",
                                    r.rank, n, before, duration_text(worst))});
}

void align_rank_clocks(RunModel& model) {
  struct Extent {
    size_t index;
    int64_t start, end;
  };
  std::vector<Extent> ext;
  for (size_t i = 0; i < model.ranks.size(); ++i) {
    const RankData& r = model.ranks[i];
    if (r.windows.empty()) continue;
    int64_t start = INT64_MAX, end = INT64_MIN;
    for (const CaptureWindow& w : r.windows) {
      start = std::min(start, w.start_ns);
      end = std::max(end, w.end_ns);
    }
    ext.push_back({i, start, end});
  }
  if (ext.size() < 2) return;
  std::vector<int64_t> starts, spans;
  for (const Extent& e : ext) {
    starts.push_back(e.start);
    spans.push_back(e.end - e.start);
  }
  const int64_t ref_start = lower_median(starts);
  const int64_t span = std::max(lower_median(spans), kMinClockSlackNs);
  for (const Extent& e : ext) {
    const int64_t off = e.start - ref_start;  // both in [0, 2^62]: no overflow
    if (off <= span && off >= -span) continue;
    RankData& r = model.ranks[e.index];
    shift_rank(r, -off);
    model.problems.push_back(
        {"clock_disagrees", r.rank, "",
         fmt::format("rank {} (host {}): its clock is {} {} the other ranks' (more than the run's {}); its times "
                     "were shifted to start with theirs",
                     r.rank, r.host, duration_text(double(off)), off > 0 ? "ahead of" : "behind",
                     duration_text(double(span)))});
  }
}

void check_comm_sizes(RunModel& model, int limit, unsigned threads) {
  // Ranks are independent: on every core (issue 29: 70 ms of one thread at 100,000 ranks), the
  // problems said in rank order afterwards.
  struct Left {
    size_t dropped = 0;
    int claimed = 0;
  };
  std::vector<Left> left(model.ranks.size());
  parallel_for(left.size(), reader_threads(threads, left.size()), [&](size_t i) {
    Left& l = left[i];
    for (CaptureWindow& w : model.ranks[i].windows)
      l.dropped += std::erase_if(w.collectives, [&](const Collective& c) {
        if (c.comm_nranks <= limit && c.comm_rank < c.comm_nranks) return false;
        l.claimed = std::max(l.claimed, c.comm_nranks);
        return true;
      });
  });
  for (size_t i = 0; i < left.size(); ++i)
    if (left[i].dropped)
      model.problems.push_back({"invalid_value", model.ranks[i].rank, "",
                                fmt::format("rank {}: {} NCCL operations name a communicator of {} ranks (or a rank "
                                            "outside it), more than the run's {}; left out",
                                            model.ranks[i].rank, left[i].dropped, left[i].claimed, limit)});
}

void list_missing_ranks(RunModel& model) {
  std::set<int> present;
  for (const auto& r : model.ranks) present.insert(r.rank);
  std::vector<std::pair<int, int>> rest;  // ranges [first, last] beyond those listed one by one
  size_t listed = 0, unlisted = 0;
  for (int rank = 0; rank < model.world_size; ++rank) {
    if (present.count(rank)) continue;
    int last = rank;  // a run of absent ranks (e.g. 2 imported ranks of a 128-rank job) is one entry
    while (last + 1 < model.world_size && !present.count(last + 1)) ++last;
    if (listed < kMissingListedEach) {
      ++listed;
      if (last - rank < 2) {
        model.problems.push_back({"missing_rank", rank, "",
                                  fmt::format("rank {} wrote no readable file (world size {})", rank, model.world_size)});
        continue;
      }
      model.problems.push_back({"missing_rank", rank, "",
                                fmt::format("ranks {}-{} ({} ranks) wrote no readable file (world size {})", rank, last,
                                            last - rank + 1, model.world_size)});
      rank = last;
      continue;
    }
    unlisted += static_cast<size_t>(last - rank + 1);
    if (rest.size() < 8) rest.push_back({rank, last});
    rank = last;
  }
  if (!unlisted) return;
  std::string ranges;
  for (const auto& [a, b] : rest) ranges += (ranges.empty() ? "" : ",") + (a == b ? fmt::format("{}", a) : fmt::format("{}-{}", a, b));
  model.problems.push_back({"missing_rank", -1, "",
                            fmt::format("{} more ranks wrote no readable file (world size {}): {}{}", unlisted,
                                        model.world_size, ranges, rest.size() == 8 ? ",..." : "")});
}

}  // namespace laggard::report
