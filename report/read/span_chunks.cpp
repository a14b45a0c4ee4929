#include "span_chunks.h"

#include <algorithm>
#include <vector>

namespace laggard::report {

bool spans_fit_one_array(uint64_t records, uint64_t labels) {
  return records <= UINT32_MAX && labels < PackedSpan::kEscaped;
}

uint32_t SpanChunk::append(SpanChunk&& other) {
  const SpanChunk gone = std::move(other);  // freed on return: a rank's files are not kept twice
  const auto first = static_cast<uint32_t>(packed.size());
  // other's label ids as this chunk's, through packing's own table, made anew from the labels (a
  // read file's was dropped, and is wrong once string ids are renumbered). A rank's files share
  // most labels (the same kernels in the same sections), so the table grows little.
  drop_label_lookups();
  for (uint32_t i = 0; i < labels.size(); ++i) label_lookup.try_emplace(labels[i], i);
  std::vector<uint32_t> label(gone.labels.size());
  for (size_t j = 0; j < gone.labels.size(); ++j) {
    uint32_t last = PackedSpan::kEscaped;
    label[j] = find_label(gone.labels[j], last);
  }
  const auto escaped_first = static_cast<uint32_t>(escaped.size());
  escaped.insert(escaped.end(), gone.escaped.begin(), gone.escaped.end());
  const size_t needed = packed.size() + gone.packed.size();  // the caller reserved the rank's sum, or grows it
  if (needed > packed.capacity()) packed.reserve(std::max(needed, 2 * packed.capacity()));
  for (size_t j = 0; j < gone.packed.size(); ++j) {
    PackedSpan p = gone.packed[j];
    const size_t i = packed.size();
    const GpuSpan a = gone.at(j);
    if ((i & kBlockMask) == 0) block_base.push_back(base_for(a.start_ns));
    if (is_escaped(p)) {
      p.duration_ns += escaped_first;  // its index in escaped
    } else {
      // The same start from this position's base, where it fits; else packed again (escaped if need be).
      const int64_t offset = static_cast<int64_t>(static_cast<uint64_t>(a.start_ns) - static_cast<uint64_t>(base_of(i)));
      if (offset < 0 || offset > UINT32_MAX || label[p.label] >= PackedSpan::kEscaped) {
        packed.push_back(pack(a, base_of(i)));
        continue;
      }
      p.start_offset_ns = static_cast<uint32_t>(offset);
      p.label = static_cast<uint16_t>(label[p.label]);
    }
    packed.push_back(p);
  }
  drop_label_lookups();  // freed as after reading a file; a record packed again builds them anew
  return first;
}

}  // namespace laggard::report
