#include "span_chunks.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace laggard::report {
namespace {

// A label as its 16 bytes (SpanChunk::Label has no padding: model.h asserts it).
struct LabelBytes {
  uint64_t lo, hi;
  bool operator==(const LabelBytes&) const = default;
};
LabelBytes bytes_of(const SpanChunk::Label& l) {
  LabelBytes b;
  std::memcpy(&b, &l, sizeof b);
  return b;
}
struct LabelBytesHash {
  size_t operator()(const LabelBytes& b) const {
    const uint64_t h = (b.lo ^ (b.hi * 0x9e3779b97f4a7c15u)) * 0xff51afd7ed558ccdu;
    return static_cast<size_t>(h ^ (h >> 32));
  }
};
static_assert(sizeof(LabelBytes) == sizeof(SpanChunk::Label));

// from's label ids as into's, adding those into lacks. A rank's files share most labels (the
// same kernels in the same sections), so into's table grows little.
std::vector<uint32_t> labels_into(SpanChunk& into, const SpanChunk& from) {
  std::unordered_map<LabelBytes, uint32_t, LabelBytesHash> id_of;
  id_of.reserve(into.labels.size() + from.labels.size());
  for (uint32_t i = 0; i < into.labels.size(); ++i) id_of.try_emplace(bytes_of(into.labels[i]), i);
  std::vector<uint32_t> to(from.labels.size());
  for (size_t j = 0; j < from.labels.size(); ++j) {
    auto [it, added] = id_of.try_emplace(bytes_of(from.labels[j]), static_cast<uint32_t>(into.labels.size()));
    if (added) into.labels.push_back(from.labels[j]);
    to[j] = it->second;
  }
  return to;
}

}  // namespace

bool spans_fit_one_array(uint64_t records, uint64_t labels) {
  return records <= UINT32_MAX && labels < PackedSpan::kEscaped;
}

uint32_t append_spans(SpanChunk& into, SpanChunk&& from) {
  const SpanChunk gone = std::move(from);  // freed on return: a rank's files are not kept twice
  const auto first = static_cast<uint32_t>(into.packed.size());
  const std::vector<uint32_t> label = labels_into(into, gone);
  const auto escaped_first = static_cast<uint32_t>(into.escaped.size());
  into.escaped.insert(into.escaped.end(), gone.escaped.begin(), gone.escaped.end());
  const size_t needed = into.packed.size() + gone.packed.size();  // the caller reserved the rank's sum, or grows it
  if (needed > into.packed.capacity()) into.packed.reserve(std::max(needed, 2 * into.packed.capacity()));
  for (PackedSpan p : gone.packed) {
    if (SpanChunk::is_escaped(p)) p.duration_ns += escaped_first;  // its index in escaped
    else p.label = label[p.label];
    into.packed.push_back(p);
  }
  // What packing looks labels up in no longer knows every label (a record packed again, as
  // reader_checks.cpp's clock shift does, builds them anew).
  into.drop_label_lookups();
  return first;
}

}  // namespace laggard::report
