// The in-memory run model every analysis and renderer consumes: ranks x capture windows x
// sections, plus the problems met while reading. Built only by the reader (from files) or by
// tests (synthetic), so analyses are pure functions of it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace laggard::report {

struct Occurrence {
  int64_t start_ns;  // epoch ns
  int64_t dur_ns;
  uint32_t tid;
  double weight;     // occurrences it stands for (count / stored, >= 1 when sampled)
};

struct SectionWindow {
  std::string name;
  std::string parent;  // empty: top level
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0, median_ns = 0;
  std::vector<Occurrence> occurrences;
};

using Counts = std::map<std::string, uint64_t>;

struct CaptureWindow {
  uint64_t index = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<SectionWindow> sections;
  Counts dropped;
};

struct RankData {
  int rank = -1;
  int local_rank = -1;
  int world_size = -1;
  std::string host;
  long pid = 0;
  std::string run_id;
  int64_t process_start_ns = 0;
  int64_t data_end_ns = 0;
  bool final = false;  // the process exited cleanly and wrote its last window
  int signal = 0;      // last flush was caused by this signal
  double flush_s = 0;
  std::string nvtx_status;
  Counts dropped;      // totals over the run
  std::vector<CaptureWindow> windows;  // sorted by index
  std::vector<std::string> files;
};

struct Problem {
  std::string kind;  // missing_rank, unreadable_file, incomplete_rank, duplicate_rank, ...
  int rank = -1;     // -1: not about one rank
  std::string file;
  std::string message;
};

struct RunModel {
  std::string dir;
  std::string run_id;
  int world_size = -1;
  std::vector<RankData> ranks;  // sorted by rank, one per rank
  std::vector<Problem> problems;
  std::vector<std::string> other_runs;  // run ids found beside this one in the same directory
};

}  // namespace laggard::report
