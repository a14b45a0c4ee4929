// A hang report: what every thread of a rank was doing when the rank stopped making progress.
// Plain records filled by the watchdog (watchdog.cpp) and rendered as one JSON file per report
// (docs/schema.md, "Version 4: hang reports").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace laggard {

struct StackFrame {
  uint64_t pc = 0;           // return address (the interrupted pc for frame 0)
  std::string module;        // file the pc lies in ("" when unknown)
  uint64_t module_base = 0;  // load address of that module
  std::string symbol;        // demangled, "" when unknown
  uint64_t offset = 0;       // pc - symbol start
};

struct OpenSection {
  std::string name;          // qualified ("domain::message" or "message")
  int64_t start_ns = 0;      // epoch
};

struct ThreadReport {
  uint32_t tid = 0;
  std::string name;          // /proc/self/task/TID/comm
  bool main = false;         // tid == pid
  // "captured"; "blocked" (running with the signal blocked); "timeout" (no answer in time);
  // "watchdog" (laggard's own thread); "no_unwinder" (libunwind missing); "no_signal" (none free);
  // "gone" (exited meanwhile).
  std::string status;
  // How it was read (schema v5, issue 24): "in_place" (blocked in the kernel: read without a
  // signal), "signal" (running: interrupted once), "" (not read).
  std::string method;
  std::vector<StackFrame> frames;       // innermost first
  std::vector<OpenSection> sections;    // NVTX push/pop ranges open, outermost first
};

struct CollectiveState {
  uint64_t comm_hash = 0;
  std::string comm_name;
  int comm_rank = -1, comm_nranks = 0;
  std::string func;          // "AllReduce", "Send", ...
  uint64_t seq = 0;          // NCCL's per-communicator sequence number (collectives only)
  bool p2p = false;
  int peer = -1;
  int64_t host_start_ns = 0; // epoch
  bool host_stopped = false; // NCCL finished enqueueing it
  int channels = 0, channels_started = 0, channels_stopped = 0;  // GPU channels
};

struct CollectiveProgress {
  bool active = false;       // the NCCL source is loaded
  std::vector<CollectiveState> in_flight;
  std::optional<CollectiveState> last_started, last_completed;
};

struct HangReport {
  std::string run_id;
  int rank = -1, local_rank = -1, world_size = -1;
  std::string host;
  long pid = 0;
  std::string image;               // this process image's identity (see FileInfo::image)
  int index = 0;                   // 0 for the first report of this process, then 1, 2, ...
  int64_t written_ns = 0;          // epoch
  int64_t last_progress_ns = 0;    // epoch: the last NVTX range entry/exit or collective event
  double hang_s = 0;               // LAGGARD_HANG_S
  int signal = 0;                  // real-time signal used for the stacks (0: none)
  std::string unwinder;            // "libunwind" or "unavailable: why"
  std::string python;              // "" (not Python) or what to do for Python stacks
  std::vector<ThreadReport> threads;
  CollectiveProgress collectives;
};

std::string render_hang_report(const HangReport& r);

// "hang-rank00003-<pid>-<image>-0002.json" ("hang-rank00003-<pid>-0002.json" without an image)
std::string hang_report_name(int rank, long pid, const std::string& image, int index);

}  // namespace laggard
