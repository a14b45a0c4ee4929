// Typed reading of raw CUPTI activity records. CUPTI fills records of its own version (CUDA 12
// delivers CUpti_ActivityKernel9 / Memcpy5, CUDA 13 Kernel10 / Memcpy6); every field read here
// sits at the same offset in all of them (checked at build time), so one parser reads both.
#pragma once

#include <cupti.h>

#include <array>
#include <cstdint>

namespace laggard::cupti {

enum class RecordKind : uint8_t { kernel = 0, memcpy = 1, memset = 2 };

struct GpuRecord {
  RecordKind kind = RecordKind::kernel;
  const char* name = nullptr;  // kernels: CUPTI-owned, shared by all records of the kernel
  uint64_t start = 0, end = 0; // CUPTI timestamps (ns)
  uint32_t device = 0, stream = 0, correlation = 0;
  std::array<uint32_t, 3> grid{}, block{};
  uint64_t bytes = 0;          // memcpy/memset
  uint8_t copy_kind = 0;       // CUpti_ActivityMemcpyKind
  bool graph = false;          // part of a CUDA graph launch
};

enum class ParseResult { ok, no_timestamp, other_kind };

// Bounds of a usable record's times: 2^62 ns is the year 2116 from the Unix epoch (48 years of
// TSC cycles at 3 GHz), and 2^53 ns (104 days) the longest duration a rank file holds
// (docs/schema.md, the reader's bound). Beyond them a record counts as having no timestamp.
constexpr uint64_t kMaxTimestamp = uint64_t{1} << 62;
constexpr uint64_t kMaxDuration = uint64_t{1} << 53;

// Reads kernels (CONCURRENT_KERNEL, KERNEL), memcpys and memsets; other kinds are left alone.
ParseResult parse_record(const CUpti_Activity* record, GpuRecord* out);

// True for NCCL's device kernels: the name contains "ncclDev" (NVRx's test, e.g.
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL") or "ncclKernel" (older NCCL), mangled or not.
bool is_nccl_kernel(const char* name);

// "[memcpy HtoD]" and the like, for memcpy/memset records in kernel lists.
const char* memcpy_label(uint8_t copy_kind);

}  // namespace laggard::cupti
