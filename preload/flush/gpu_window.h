// GPU activity of one window (CUPTI), as the writer needs it: plain data, strings resolved into a
// window-local table, times in epoch nanoseconds. Filled by the cupti/ source in its on_window hook.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace laggard {

enum class GpuRecordKind : uint8_t { kernel = 0, memcpy = 1, memset = 2 };

constexpr uint32_t kNoString = 0xffffffffu;  // no section: "(no section)" in the report

// Per (section, name, kind, graph, grid, block): what GPU scores are computed from.
struct GpuKernelStats {
  uint32_t section = kNoString;  // index into GpuWindow::strings
  uint32_t name = kNoString;     // kernel name as CUPTI gives it (mangled); "[memcpy HtoD]", "[memset]"
  GpuRecordKind kind = GpuRecordKind::kernel;
  bool nccl = false;             // NCCL kernel: communication, not compute
  bool graph = false;            // launched as part of a CUDA graph
  std::array<uint32_t, 3> grid{}, block{};
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
  int64_t median_ns = 0;         // exact up to kMedianSample durations per key and window
};

// Per-record flags in GpuRecords::flags.
constexpr uint8_t kGpuFlagNccl = 1;
constexpr uint8_t kGpuFlagGraph = 2;
constexpr uint8_t kGpuFlagUnmatched = 4;  // launching call not seen: section unknown
constexpr uint8_t kGpuFlagLate = 8;       // completed before an earlier window closed (schema v5):
                                          // counted in that window's statistics (GpuWindow::late)

// One entry per GPU activity, columnar (one vector per field) so a window of many thousands of
// kernels stays a few arrays of numbers on disk.
struct GpuRecords {
  std::vector<uint8_t> kind;            // GpuRecordKind
  std::vector<uint32_t> name, section;  // indices into GpuWindow::strings (section: kNoString)
  std::vector<int64_t> start_ns, dur_ns;          // GPU time, epoch ns
  std::vector<int64_t> api_start_ns, api_dur_ns;  // launching host call, epoch ns; dur -1: unknown
  std::vector<uint32_t> tid, correlation, stream;
  std::vector<int32_t> device;
  std::vector<int32_t> shape;           // index into shapes, -1 for memcpy/memset
  std::vector<uint64_t> bytes;          // memcpy/memset
  std::vector<uint8_t> copy_kind;       // CUPTI's CUpti_ActivityMemcpyKind value
  std::vector<uint8_t> flags;           // kGpuFlag*
  std::vector<std::array<uint32_t, 6>> shapes;  // grid x,y,z, block x,y,z

  size_t size() const { return kind.size(); }
};

// Statistics of records that completed before an earlier window's close but reached laggard
// only in this one (schema v5, docs/schema.md "Version 5: late GPU records"): they belong to
// window `window`, whose file was already written, and the reader adds them to it.
struct GpuLateStats {
  uint64_t window = 0;
  std::vector<GpuKernelStats> kernels;  // strings index this window's table
};

struct GpuWindow {
  bool present = false;         // CUPTI capture was attached during this window
  bool sampled = false;         // capture was switched on for this window (LAGGARD_PROFILING_INTERVAL)
  int64_t clock_offset_ns = 0;  // host epoch - CUPTI timestamp, measured at this window's close
  // Schema v4 (docs/schema.md, "Version 4: CUPTI").
  uint64_t launches = 0;        // launch callbacks seen while capture was on
  std::string starved;          // why CUPTI delivered (almost) nothing although kernels were launched
  double clock_ticks_per_ns = 1.0;  // CUPTI timestamp units per ns (not 1: another client's callback)
  std::string clock_problem;    // GPU times of this window are not reliable, and why
  std::vector<std::string> strings;
  std::vector<GpuKernelStats> kernels;
  GpuRecords records;           // up to kGpuRecordsPerWindow; the rest are counted, not stored
  // Schema v5: late records (in `records` with kGpuFlagLate, in `late` rather than `kernels`).
  std::vector<GpuLateStats> late;  // by window, oldest first
  uint64_t late_unplaced = 0;      // ended before the oldest close remembered: in `kernels`
  // Issue 26 (docs/schema.md, "Issue 26: CUPTI shared with another client"), optional.
  std::string shared;              // another CUPTI client held what laggard uses, and what that cost
  uint64_t missed_launches = 0;    // launches whose records laggard did not get because of it
};

// What the file header says about GPU capture; the latest window's state wins.
struct GpuStatus {
  std::string cupti;            // "on", "off: why", "idle: ..." (empty: not reported)
  std::string library;          // the libcupti that was loaded
  uint32_t version = 0;         // cuptiGetVersion (CUPTI_API_VERSION of the library); 0: unknown
  bool has_clock = false;
  int64_t clock_offset_ns = 0;          // host epoch - CUPTI timestamp
  int64_t clock_uncertainty_ns = 0;     // width of the tightest measurement bracket
};

}  // namespace laggard
