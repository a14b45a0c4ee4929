// libFuzzer target: what laggard does with the activity records CUPTI hands to the
// buffer-completed callback (cupti/gpu_capture.cpp, GpuCapture::consume): each record read
// (cupti/activity_parser.cpp), aggregated per window with late records placed by the window
// closes (cupti/gpu_aggregator.cpp), then the window written both ways the writer can (JSON
// records, schema v2-4; binary columns, schema v5: preload/files/gpu_json.cpp, preload/files/frame_out.cpp)
// and read back by the report (report/read/reader_gpu.cpp, reader_frames.cpp).
//
// The input spells a sequence of operations. A record is the bytes of the record struct its kind
// selects, as cupti_activity.h (CUDA 13) lays them out: CUpti_ActivityKernel10 (KERNEL and
// CONCURRENT_KERNEL), CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivityAPI (RUNTIME:
// a kind the parser leaves alone), or a made-up kind; every field holds whatever the input says,
// except the kernel name, a pointer CUPTI owns: one of a few real strings or null. Each record
// comes with what the launch callback saw for it, or nothing (an unmatched record).
//
// Checks: no crash or sanitizer report anywhere (signed overflow included: CUPTI's timestamps
// are unsigned and a broken record may hold any value); the JSON and binary forms of a window
// read back to the same records and statistics, or are both refused.
#include <cupti.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "activity_parser.h"
#include "frame_out.h"
#include "gpu_aggregator.h"
#include "gpu_json.h"
#include "json_out.h"
#include "records.h"
#include "reader_gpu.h"

namespace {

using laggard::cupti::GpuAggregator;
using laggard::cupti::GpuRecord;
using laggard::cupti::LaunchInfo;
using laggard::cupti::ParseResult;

constexpr int64_t kEpoch = 1'700'000'000'000'000'000;

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  uint64_t word(int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v = v << 8 | byte();
    return v;
  }
  // `n` bytes into `out` (zeros past the end of the input).
  void bytes(void* out, size_t n) {
    size_t have = std::min(n, n_ - std::min(i_, n_));
    std::memcpy(out, d_ + std::min(i_, n_), have);
    std::memset(static_cast<char*>(out) + have, 0, n - have);
    i_ += have;
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

// Names as CUPTI hands them: mangled, demangled, NCCL's, empty.
const char* const kNames[] = {"_Z6kernelPfS_i", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "void gemm<float>(float*)",
                              "", "ncclKernel_Broadcast_RING_LL_Sum_int8_t", "x\n\x1b[2J\"\\"};

// One record buffer as CUPTI's buffer holds it: 8-byte aligned, the struct of its kind.
union Record {
  CUpti_Activity base;
  CUpti_ActivityKernel10 kernel;
  CUpti_ActivityMemcpy6 memcpy;
  CUpti_ActivityMemset4 memset;
  CUpti_ActivityAPI api;
};

// Reads one record from the input and sets what the input cannot: the kind, the name pointer.
// Timestamps are taken near a fixed base when the input asks, so that most windows are readable.
void fill_record(Input& in, Record& rec) {
  uint8_t sort = in.byte();
  static constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL,
                                                  CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                                  CUPTI_ACTIVITY_KIND_RUNTIME};
  // Any kind the enumeration declares (another value is not a CUpti_ActivityKind CUPTI could write).
  CUpti_ActivityKind kind =
      sort % 6 < 5 ? kKinds[sort % 6] : static_cast<CUpti_ActivityKind>(in.word(4) % CUPTI_ACTIVITY_KIND_COUNT);
  std::memset(&rec, 0, sizeof rec);
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      in.bytes(&rec.kernel, sizeof rec.kernel);
      uint8_t name = in.byte();
      rec.kernel.name = name < 6 * 40 ? kNames[name % 6] : nullptr;
      if (sort & 0x80) rec.kernel.start %= 1u << 30, rec.kernel.end = rec.kernel.start + rec.kernel.end % (1u << 24);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      in.bytes(&rec.memcpy, sizeof rec.memcpy);
      if (sort & 0x80) rec.memcpy.start %= 1u << 30, rec.memcpy.end = rec.memcpy.start + rec.memcpy.end % (1u << 24);
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      in.bytes(&rec.memset, sizeof rec.memset);
      if (sort & 0x80) rec.memset.start %= 1u << 30, rec.memset.end = rec.memset.start + rec.memset.end % (1u << 24);
      break;
    default:
      in.bytes(&rec.api, sizeof rec.api);
      break;
  }
  rec.base.kind = kind;
}

LaunchInfo launch_info(Input& in) {
  LaunchInfo l;
  uint8_t s = in.byte();
  l.section = s < 200 ? s % 4 : laggard::kNoName;
  l.tid = static_cast<uint32_t>(in.word(4));
  // Launch times are laggard's own CLOCK_MONOTONIC readings (0: the call had not returned),
  // not CUPTI's data: any time within 2^50 ns (13 days) of boot.
  l.api_start_ns = static_cast<int64_t>(in.word(8) % (uint64_t{1} << 50));
  l.api_end_ns = static_cast<int64_t>(in.word(8) % (uint64_t{1} << 50));
  return l;
}

[[noreturn]] void differ(const char* what) {
  std::fprintf(stderr, "JSON and binary GPU records read back differently: %s\n", what);
  __builtin_trap();
}

bool same(const laggard::report::GpuActivity& a, const laggard::report::GpuActivity& b) {
  return a.kind == b.kind && a.name == b.name && a.section == b.section && a.start_ns == b.start_ns &&
         a.end_ns == b.end_ns && a.api_start_ns == b.api_start_ns && a.api_end_ns == b.api_end_ns &&
         a.api_tid == b.api_tid && a.correlation == b.correlation && a.device == b.device && a.stream == b.stream &&
         std::equal(a.grid, a.grid + 3, b.grid) && std::equal(a.block, a.block + 3, b.block) && a.bytes == b.bytes &&
         a.copy_kind == b.copy_kind && a.nccl == b.nccl && a.graph == b.graph;
}

bool same(const laggard::report::KernelWindowStats& a, const laggard::report::KernelWindowStats& b) {
  return a.section == b.section && a.name == b.name && a.kind == b.kind && a.nccl == b.nccl && a.graph == b.graph &&
         std::equal(a.grid, a.grid + 3, b.grid) && std::equal(a.block, a.block + 3, b.block) && a.count == b.count &&
         a.total_ns == b.total_ns && a.min_ns == b.min_ns && a.max_ns == b.max_ns && a.median_ns == b.median_ns;
}

// The window's "gpu" object as the writer renders it, read back as the report reads it: with
// the records in the JSON (binary = false) or beside it as a frame's GPU block.
bool read_back(const laggard::GpuWindow& g, int64_t start, bool binary, laggard::report::StringTable& strings,
               laggard::report::CaptureWindow& out) {
  std::string text;
  laggard::JsonOut j(text);
  laggard::render_gpu_window(j, g, start, !binary);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    std::fprintf(stderr, "not JSON: %s\n", text.c_str());
    __builtin_trap();
  }
  try {
    laggard::report::read_gpu_window(doc, start, strings, out, binary ? laggard::encode_gpu_block(g, start) : "");
    return true;
  } catch (const std::exception&) {
    return false;  // the window is left out and described; the same must happen both ways
  }
}

void check_window(const laggard::GpuWindow& g, int64_t start) {
  laggard::report::StringTable strings;
  laggard::report::CaptureWindow json, binary;
  bool json_ok = read_back(g, start, false, strings, json);
  bool binary_ok = read_back(g, start, true, strings, binary);
  if (json_ok != binary_ok) differ(json_ok ? "only the binary form is refused" : "only the JSON form is refused");
  if (!json_ok) return;
  if (json.gpu.size() != binary.gpu.size()) differ("record count");
  for (size_t i = 0; i < json.gpu.size(); ++i)
    if (!same(json.gpu[i], binary.gpu[i])) differ("a record");
  if (json.kernel_stats.size() != binary.kernel_stats.size()) differ("statistics count");
  for (size_t i = 0; i < json.kernel_stats.size(); ++i)
    if (!same(json.kernel_stats[i], binary.kernel_stats[i])) differ("statistics");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  GpuAggregator agg(/*records_per_window=*/64, /*median_sample=*/8, /*late_windows=*/4);
  const int64_t gpu_to_epoch = kEpoch + static_cast<int64_t>(in.word(2)) * 1000;
  int64_t window_start = kEpoch;
  uint64_t window = 0;
  auto section_name = [](uint32_t id) { return "section" + std::to_string(id); };
  Record rec;
  for (int ops = 0; !in.empty() && ops < 512; ++ops) {
    switch (in.byte() % 4) {
      case 0:
      case 1: {
        fill_record(in, rec);
        bool matched = in.byte() & 1;
        LaunchInfo l = matched ? launch_info(in) : LaunchInfo{};
        GpuRecord r;
        if (laggard::cupti::parse_record(&rec.base, &r) == ParseResult::ok) agg.add(r, matched ? &l : nullptr);
        break;
      }
      case 2:
        agg.close_boundary(window, in.word(8));
        break;
      case 3: {
        laggard::GpuWindow g = agg.close(gpu_to_epoch, kEpoch, section_name);
        g.sampled = true;
        check_window(g, window_start);
        ++window;
        window_start += 1'000'000'000;
        break;
      }
    }
  }
  check_window(agg.close(gpu_to_epoch, kEpoch, section_name), window_start);
  return 0;
}
