#include "activity_parser.h"

#include <cstddef>
#include <cstring>

namespace laggard::cupti {
namespace {

using Kernel = CUpti_ActivityKernel10;  // CUDA 13; CUDA 12 CUPTI delivers Kernel9
using Memcpy = CUpti_ActivityMemcpy6;   // CUDA 13; CUDA 12 delivers Memcpy5
using Memset = CUpti_ActivityMemset4;

// The parser reads only fields in the common prefix of the record versions CUDA 12 and 13
// deliver; these checks keep it that way if the headers ever move them.
#define SAME_OFFSET(A, B, f) static_assert(offsetof(A, f) == offsetof(B, f), #f " moved between " #A " and " #B)
#define KERNEL_FIELDS(B)                                                                       \
  SAME_OFFSET(Kernel, B, start); SAME_OFFSET(Kernel, B, end); SAME_OFFSET(Kernel, B, deviceId); \
  SAME_OFFSET(Kernel, B, streamId); SAME_OFFSET(Kernel, B, gridX); SAME_OFFSET(Kernel, B, gridY); \
  SAME_OFFSET(Kernel, B, gridZ); SAME_OFFSET(Kernel, B, blockX); SAME_OFFSET(Kernel, B, blockY); \
  SAME_OFFSET(Kernel, B, blockZ); SAME_OFFSET(Kernel, B, correlationId); SAME_OFFSET(Kernel, B, name); \
  SAME_OFFSET(Kernel, B, graphId)
KERNEL_FIELDS(CUpti_ActivityKernel9);
KERNEL_FIELDS(CUpti_ActivityKernel8);
#define MEMCPY_FIELDS(B)                                                                            \
  SAME_OFFSET(Memcpy, B, copyKind); SAME_OFFSET(Memcpy, B, bytes); SAME_OFFSET(Memcpy, B, start);   \
  SAME_OFFSET(Memcpy, B, end); SAME_OFFSET(Memcpy, B, deviceId); SAME_OFFSET(Memcpy, B, streamId); \
  SAME_OFFSET(Memcpy, B, correlationId); SAME_OFFSET(Memcpy, B, graphId)
MEMCPY_FIELDS(CUpti_ActivityMemcpy5);
MEMCPY_FIELDS(CUpti_ActivityMemcpy4);
// Every field read lies within the smallest record version the parser may be handed.
static_assert(offsetof(Kernel, graphId) + sizeof(uint32_t) <= sizeof(CUpti_ActivityKernel8));
static_assert(offsetof(Memcpy, graphId) + sizeof(uint32_t) <= sizeof(CUpti_ActivityMemcpy4));
#undef SAME_OFFSET
#undef KERNEL_FIELDS
#undef MEMCPY_FIELDS

uint32_t dim(int32_t v) { return v < 0 ? 0 : static_cast<uint32_t>(v); }

// The fields kernel, memcpy and memset records share, by the same names in cupti_activity.h.
template <class Record>
void common_fields(const Record* x, RecordKind kind, GpuRecord& r) {
  r.kind = kind;
  r.start = x->start;
  r.end = x->end;
  r.device = x->deviceId;
  r.stream = x->streamId;
  r.correlation = x->correlationId;
  r.graph = x->graphId != 0;
}

}  // namespace

ParseResult parse_record(const CUpti_Activity* rec, GpuRecord* out) {
  if (!rec) return ParseResult::other_kind;
  GpuRecord r;
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const Kernel*>(rec);
      common_fields(k, RecordKind::kernel, r);
      r.name = k->name;
      r.grid = {dim(k->gridX), dim(k->gridY), dim(k->gridZ)};
      r.block = {dim(k->blockX), dim(k->blockY), dim(k->blockZ)};
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const Memcpy*>(rec);
      common_fields(m, RecordKind::memcpy, r);
      r.bytes = m->bytes;
      r.copy_kind = m->copyKind;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const Memset*>(rec);
      common_fields(m, RecordKind::memset, r);
      r.bytes = m->bytes;
      break;
    }
    default:
      return ParseResult::other_kind;
  }
  // CUPTI writes 0 when it could not collect timestamps (NVRx skips these too). Times no clock
  // gives (kMaxTimestamp) or a record longer than kMaxDuration are a corrupt record, also
  // without usable times: mapped to the host clock they overflowed (fuzz_cupti, tests/fuzz).
  if (r.start == 0 || r.end == 0 || r.end < r.start || r.end >= kMaxTimestamp || r.end - r.start > kMaxDuration)
    return ParseResult::no_timestamp;
  *out = r;
  return ParseResult::ok;
}

bool is_nccl_kernel(const char* name) {
  // "ncclDev" is NVRx's own filter; "ncclKernel" catches the names of older NCCL versions too.
  return name && (std::strstr(name, "ncclDev") || std::strstr(name, "ncclKernel"));
}

const char* memcpy_label(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "[memcpy HtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "[memcpy AtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "[memcpy AtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "[memcpy AtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "[memcpy DtoA]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[memcpy HtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
    default: return "[memcpy]";
  }
}

}  // namespace laggard::cupti
