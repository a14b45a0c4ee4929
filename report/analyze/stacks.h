// `laggard stacks DIR`: merge the hang reports of all ranks (preload/watchdog/hang_report.h writes them;
// docs/schema.md "Version 4: hang reports"), group ranks that stand at the same place, and name
// the rank(s) that are behind.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace laggard::report {

struct HangFrame {
  uint64_t pc = 0, module_base = 0, offset = 0;
  std::string module, symbol;
  std::string file;  // from debug info, filled by symbolize_hangs (offline)
  int line = 0;
};

struct HangThread {
  uint32_t tid = 0;
  std::string name, status;
  bool main = false;
  std::vector<HangFrame> frames;      // innermost first
  std::vector<std::string> sections;  // open NVTX ranges, outermost first
};

struct HangCollective {
  std::string comm, comm_name, func;
  uint64_t seq = 0;
  bool p2p = false, host_stopped = false;
  int peer = -1, channels = 0, channels_started = 0, channels_stopped = 0;
  int64_t host_start_ns = 0;
};

struct RankHang {
  std::string path;
  int rank = -1, world_size = -1, index = 0;
  std::string run_id, host, unwinder, python;
  long pid = 0;
  int64_t written_ns = 0, last_progress_ns = 0;
  double hang_s = 0;
  std::vector<HangThread> threads;
  bool nccl_active = false;
  std::vector<HangCollective> in_flight;
  std::optional<HangCollective> last_started, last_completed;
};

struct HangSet {
  std::vector<RankHang> ranks;        // newest report per rank, by rank
  int world_size = -1;
  std::vector<std::string> problems;  // files that could not be read, one line each
};

// Hang report files (hang-*.json) in dir or in its run directories, sorted.
std::vector<std::string> find_hang_reports(const std::string& dir);
// Reads them; the newest report per rank wins. Never throws for a bad file (see problems).
HangSet read_hang_reports(const std::string& dir);
// The same from a list of hang report files.
HangSet read_hang_reports(const std::vector<std::string>& files);
RankHang parse_hang_report(const nlohmann::json& j, const std::string& path);  // throws on bad input

// file:line for each frame whose module is readable here, with addr2line (binutils) if present.
void symbolize_hangs(HangSet& set);

struct HangGroup {
  std::vector<int> ranks;
  bool behind = false;
  std::string section;                       // innermost open section of the rank's main thread
  std::optional<HangCollective> collective;  // newest collective in flight
  std::vector<std::string> where;            // application frames, innermost first, short names
  std::string sentence;                      // "ranks 0, 2–3 wait in ..." / "rank 1 is still in ..."
};

struct HangAnalysis {
  std::vector<HangGroup> groups;  // largest first
  std::vector<int> behind;
  std::vector<int> missing;       // ranks of world_size without a hang report
  std::string how;                // how "behind" was decided
  std::string summary;
};

HangAnalysis analyze_hangs(const HangSet& set);

// "0, 2–7"
std::string format_ranks(const std::vector<int>& ranks);

void render_stacks_text(const HangSet& set, const HangAnalysis& a, std::ostream& out);
nlohmann::json render_stacks_json(const HangSet& set, const HangAnalysis& a);

}  // namespace laggard::report

namespace laggard::cli {

struct StacksOptions {
  std::string dir;
  std::string format = "text";  // text | json
  bool symbolize = true;        // file:line with addr2line
};

// Exit codes: 0 done, 2 no hang report readable.
int stacks_command(const StacksOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli

namespace laggard::report {
struct RunModel;
// For `laggard report`: a short mention of the run's hang reports, if any (nothing when none): those
// read_run listed with its rank files, else those find_hang_reports finds in its directory.
void mention_hangs_text(const RunModel& run, std::ostream& out);
// null when none; else {"count", "behind", "summary", "see"}.
nlohmann::json mention_hangs_json(const RunModel& run);
}  // namespace laggard::report
