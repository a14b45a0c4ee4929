// Plain records that capture sources hand to the recorder. No pointers, no strings: names are
// interned ids, times are CLOCK_MONOTONIC ns (see clock.h).
#pragma once

#include <cstdint>

namespace laggard {

constexpr uint32_t kNoName = 0xffffffffu;

enum class RangeKind : uint8_t { push_pop = 0, start_end = 1 };

struct RangeRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint32_t name_id;
  uint32_t parent_id;  // innermost enclosing kept range on the thread, or kNoName
  uint32_t tid;        // thread that opened the range
  uint16_t depth;      // NVTX nesting level at push (0 = outermost); 0 for start/end
  RangeKind kind;
  uint8_t counted_in = 0;  // generation of the thread's statistics that counted it, low 8 bits (ThreadAggregates)
};

// Things lost or malformed, counted rather than hidden. Totals go into every file.
struct DropCounters {
  uint64_t ring_full = 0;          // schema <= 3: ranges lost to a full thread buffer; 0 since v4
                                   // (a full buffer loses samples only: occurrences_sampled)
  uint64_t stack_overflow = 0;     // pushes beyond the per-thread depth limit
  uint64_t unbalanced_pop = 0;     // pops with no open range
  uint64_t unmatched_end = 0;      // nvtxRangeEnd with an id we do not know
  uint64_t start_end_evicted = 0;  // open start/end ranges overwritten by newer ones
  uint64_t names_overflow = 0;     // ranges recorded as "(other)" past the name table's limits
  uint64_t occurrences_sampled = 0;  // raw occurrences not stored (stats stay exact)
  uint64_t unclosed_at_exit = 0;   // ranges never closed: their thread or the process ended
  uint64_t sections_filtered = 0;  // ranges LAGGARD_SECTIONS did not keep (not a loss)
  // GPU (CUPTI)
  uint64_t cupti_records_dropped = 0;   // records CUPTI reports it dropped
  uint64_t gpu_buffer_full = 0;         // CUPTI buffer requests declined: laggard's pool was full
  uint64_t unmatched_correlation = 0;   // GPU records whose launching call was not seen
  uint64_t gpu_no_timestamp = 0;        // GPU records without start/end times (skipped)
  uint64_t gpu_records_not_stored = 0;  // GPU records in the statistics but not stored one by one

  DropCounters& operator+=(const DropCounters& o) {
    ring_full += o.ring_full;
    stack_overflow += o.stack_overflow;
    unbalanced_pop += o.unbalanced_pop;
    unmatched_end += o.unmatched_end;
    start_end_evicted += o.start_end_evicted;
    names_overflow += o.names_overflow;
    occurrences_sampled += o.occurrences_sampled;
    unclosed_at_exit += o.unclosed_at_exit;
    sections_filtered += o.sections_filtered;
    cupti_records_dropped += o.cupti_records_dropped;
    gpu_buffer_full += o.gpu_buffer_full;
    unmatched_correlation += o.unmatched_correlation;
    gpu_no_timestamp += o.gpu_no_timestamp;
    gpu_records_not_stored += o.gpu_records_not_stored;
    return *this;
  }
};

}  // namespace laggard
