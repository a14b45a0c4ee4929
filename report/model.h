// The in-memory run model every analysis and renderer consumes: ranks x capture windows x
// sections, plus the problems met while reading. Built only by the reader (from files) or by
// tests (synthetic), so analyses are pure functions of it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace laggard::report {

struct Occurrence {
  int64_t start_ns;  // epoch ns
  int64_t dur_ns;
  uint32_t tid;
  double weight;     // occurrences it stands for (count / stored, >= 1 when sampled)
};

struct SectionWindow {
  std::string name;    // as Nsight Systems shows it: "message", or "domain:message"
  std::string domain;  // NVTX domain; empty: the default domain (schema_version >= 4)
  std::string parent;  // empty: top level
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0, median_ns = 0;
  bool median_from_sample = false;  // median_ns is of a sample of the occurrences
  std::vector<Occurrence> occurrences;
};

using Counts = std::map<std::string, uint64_t>;

// Strings shared by the whole run (kernel names, sections of kernels, communicators, ...):
// records hold indices so a run of millions of kernels does not hold millions of strings.
class StringTable {
 public:
  static constexpr uint32_t kNone = 0xffffffffu;
  // Looked up by hash without building a std::string (the reader interns every name of every
  // window of every rank). Open addressing over the ids themselves (issue 29): a std::unordered_map
  // kept a second copy of each string as its key, in a node of its own, and chased a pointer per
  // probe; this keeps one copy, and a probe compares the stored hash before the text.
  uint32_t intern(std::string_view s) {
    const uint64_t h = hash(s);
    size_t at = find_slot(s, h);
    if (slots_[at]) return id_of(slots_[at]);
    const auto id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    slots_[at] = slot_value(h, id);
    if (strings_.size() * 4 > slots_.size() * 3) grow();
    return id;
  }
  const std::string& at(uint32_t id) const {
    static const std::string none;
    return id < strings_.size() ? strings_[id] : none;
  }
  size_t size() const { return strings_.size(); }
  // Replaces every string with f(string), keeping the ids (text output escapes names this way).
  template <class F>
  void transform(F f) {
    for (std::string& s : strings_) s = f(s);
    rehash(slots_.size());
  }

 private:
  // A slot: 0 empty, else the string's id + 1 in the low half and the high half of its hash above.
  static uint64_t slot_value(uint64_t h, uint32_t id) { return (h & 0xffffffff00000000ull) | (uint64_t(id) + 1); }
  static uint32_t id_of(uint64_t slot) { return static_cast<uint32_t>(slot) - 1; }
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  // Where s is, or the empty slot where it would go.
  size_t find_slot(std::string_view s, uint64_t h) {
    if (slots_.empty()) slots_.assign(16, 0);
    const size_t mask = slots_.size() - 1;
    for (size_t at = h & mask;; at = (at + 1) & mask) {
      const uint64_t v = slots_[at];
      if (!v || ((v ^ h) >> 32 == 0 && strings_[id_of(v)] == s)) return at;
    }
  }
  void grow() { rehash(slots_.size() * 2); }
  void rehash(size_t n) {
    slots_.assign(std::max<size_t>(n, 16), 0);
    for (uint32_t id = 0; id < strings_.size(); ++id) {
      const uint64_t h = hash(strings_[id]);
      size_t at = h & (slots_.size() - 1);
      while (slots_[at]) at = (at + 1) & (slots_.size() - 1);
      slots_[at] = slot_value(h, id);
    }
  }
  std::vector<std::string> strings_;
  std::vector<uint64_t> slots_;  // a power of two, at most three quarters full
};

enum class GpuKind : uint8_t { kernel = 0, memcpy = 1, memset = 2 };

// One GPU activity (kernel, memcpy, memset) from a window whose per-kernel records were kept.
struct GpuActivity {
  GpuKind kind = GpuKind::kernel;
  uint32_t name = StringTable::kNone;     // kernel name as captured (mangled); memcpy/memset: "[memcpy HtoD]"...
  uint32_t section = StringTable::kNone;  // innermost NVTX section of the launching thread; kNone: "(no section)"
  int64_t start_ns = 0, end_ns = 0;       // GPU time, epoch ns (already mapped to the host clock)
  int64_t api_start_ns = 0, api_end_ns = 0;  // the host CUDA API call that launched it; 0: unknown
  uint32_t api_tid = 0;                   // launching thread
  uint32_t correlation = 0;
  int32_t device = -1;
  uint32_t stream = 0;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t bytes = 0;                     // memcpy / memset
  uint8_t copy_kind = 0;                  // memcpy direction, CUPTI's CUpti_ActivityMemcpyKind value
  bool nccl = false;                      // an NCCL kernel: communication, not compute
  bool graph = false;                     // launched as part of a CUDA graph
  uint32_t api_name = StringTable::kNone; // version 4, imported traces: the launching call ("cudaLaunchKernel")
};

// One GPU activity as `laggard report`'s analyses (jitter, HTA breakdown, steps) read it:
// GpuActivity less the launch shape, bytes, copy kind, thread, API name and correlation id. The
// reader keeps these instead of GpuActivity when ReadOptions::compact_gpu asks (issue 14: 56 B per
// record instead of 104, for tens of millions of kernels; issue 29: 48 B, the device narrowed to
// CUDA's ordinals and the correlation id, which only broke ties in launch order, left out); the
// Chrome trace and HTML page need the rest.
struct GpuSpan {
  int64_t start_ns = 0, end_ns = 0;          // as GpuActivity
  int64_t api_start_ns = 0, api_end_ns = 0;  // 0: unknown
  uint32_t name = StringTable::kNone;
  uint32_t section = StringTable::kNone;
  uint32_t stream = 0;
  int16_t device = -1;  // -1: unknown; the readers refuse a device above kMaxGpuDevice
  GpuKind kind = GpuKind::kernel;
  bool nccl = false;
  bool operator==(const GpuSpan&) const = default;
};
static_assert(sizeof(GpuSpan) == 48);
constexpr int32_t kMaxGpuDevice = INT16_MAX;  // CUDA device ordinals are small; a file's larger one is refused

inline GpuSpan span_of(const GpuActivity& a) {
  const bool device_fits = a.device >= -1 && a.device <= kMaxGpuDevice;  // else made in memory, never read
  return {a.start_ns, a.end_ns, a.api_start_ns, a.api_end_ns, a.name, a.section, a.stream,
          static_cast<int16_t>(device_fits ? a.device : -1), a.kind, a.nccl};
}

// How a file's GpuSpans are kept once read (issue 29: 16 bytes a record instead of 48, so that
// 960 x 903 x 50 kernels fit in 2 GiB with room to spare, and every pass of the analyses over them
// reads a third of the memory). The start is a 32-bit offset from its block's base (SpanChunk::
// block_base: one per 64 positions, 2^31 ns before the block's first start, so a block's records
// may lie 2.1 s either side of it); the three host and GPU lengths are offsets from the start; what
// a record shares with many others (name, section, device, stream, kind, NCCL) is a label, an index
// into the chunk's table of them: a file has a few thousand at most (903 kernel names on one stream
// at the GTC 2020 shape). A record the offsets cannot hold exactly (a start 2.1 s from its block's
// first, a kernel or a launch queue over 4.3 s, a launch call over 65 us, a launch after its kernel's
// start, times near the ends of int64, a chunk's 65,535th label) is kept whole in SpanChunk::escaped:
// 1.7 % of the launch calls in HTA's Kineto test traces last longer than 65 us.
struct PackedSpan {
  static constexpr uint32_t kNoApi = UINT32_MAX;    // launch_lead_ns: host call unknown (both times 0)
  static constexpr uint16_t kEscaped = UINT16_MAX;  // label: kept whole, duration_ns is its index in escaped
  uint32_t start_offset_ns = 0;  // start - SpanChunk::base_of(position)
  uint32_t duration_ns = 0;      // end - start; escaped: the index in SpanChunk::escaped
  uint32_t launch_lead_ns = 0;   // start - api_start, or kNoApi
  uint16_t label = 0;            // in SpanChunk::labels, or kEscaped
  uint16_t api_duration_ns = 0;  // api_end - api_start
};
static_assert(sizeof(PackedSpan) == 16);

// One file's records in its order (RankData::span_chunks): packed, read back as GpuSpan values.
// A record's times depend on its position (its block's base): records move only through
// move_record and replace, which pack them again where the bases differ.
struct SpanChunk {
  // What records share: all of a GpuSpan but its times.
  struct Label {
    uint32_t name, section, stream;
    int16_t device;
    GpuKind kind;
    bool nccl;
    bool operator==(const Label&) const = default;
    // A label's bytes as two 8-byte words, so that the reader's test for every record is two
    // compares and one branch. Made from the fields in registers where the machine is little-endian:
    // a Label written field by field and read back as words waits for the narrow stores to reach
    // the cache (a failed store forward, a third of decode_gpu_block's samples, issue 29).
    struct Words {
      uint64_t lo, hi;
      bool operator==(const Words&) const = default;
    };
    // A record's label: what it shares with others.
    [[gnu::always_inline]] static Label of(const GpuSpan& a) { return {a.name, a.section, a.stream, a.device, a.kind, a.nccl}; }
    // of(a).words(), without the Label in memory.
    [[gnu::always_inline]] static Words words_of(const GpuSpan& a) {
      if constexpr (std::endian::native == std::endian::little) {
        return {uint64_t{a.name} | uint64_t{a.section} << 32,
                uint64_t{a.stream} | uint64_t{static_cast<uint16_t>(a.device)} << 32 |
                    uint64_t{static_cast<uint8_t>(a.kind)} << 48 | uint64_t{a.nccl} << 56};
      } else {
        return of(a).words();
      }
    }
    [[gnu::always_inline]] Words words() const {
      Words w;
      std::memcpy(&w, this, sizeof w);
      return w;
    }
  };
  static_assert(sizeof(Label) == 16 && std::has_unique_object_representations_v<Label>);
  static_assert(offsetof(Label, section) == 4 && offsetof(Label, stream) == 8 && offsetof(Label, device) == 12 &&
                offsetof(Label, kind) == 14 && offsetof(Label, nccl) == 15);  // words_of's layout
  static constexpr unsigned kBlockBits = 6;  // 64 records: 2.1 s holds them at 30 launches a second
  static constexpr size_t kBlockMask = (size_t{1} << kBlockBits) - 1;
  std::vector<PackedSpan> packed;
  std::vector<int64_t> block_base;  // per 64 positions: what their start offsets are from
  std::vector<Label> labels;
  std::vector<GpuSpan> escaped;

  size_t size() const { return packed.size(); }
  bool empty() const { return packed.empty(); }
  static bool is_escaped(const PackedSpan& p) { return p.label == PackedSpan::kEscaped; }
  [[gnu::always_inline]] int64_t base_of(size_t i) const { return block_base[i >> kBlockBits]; }
  // Inlined: the analyses read every record several times (jitter, breakdown), and only the fields
  // they use are then computed.
  [[gnu::always_inline]] GpuSpan at(size_t i) const { return unpack(packed[i], base_of(i)); }
  [[gnu::always_inline]] GpuSpan unpack(const PackedSpan& p, int64_t base) const {
    if (is_escaped(p)) [[unlikely]]
      return escaped[p.duration_ns];
    const Label& l = labels[p.label];
    const bool api = p.launch_lead_ns != PackedSpan::kNoApi;
    const uint64_t start = static_cast<uint64_t>(base) + p.start_offset_ns;
    const uint64_t api_start = start - (api ? p.launch_lead_ns : 0);
    return {static_cast<int64_t>(start), static_cast<int64_t>(start + p.duration_ns),
            api ? static_cast<int64_t>(api_start) : 0, api ? static_cast<int64_t>(api_start + p.api_duration_ns) : 0,
            l.name, l.section, l.stream, l.device, l.kind, l.nccl};
  }
  // The launch call's end of a packed (not escaped) record, as unpack gives it: 0 when unknown.
  [[gnu::always_inline]] static int64_t api_end_of(const PackedSpan& p, int64_t base) {
    if (p.launch_lead_ns == PackedSpan::kNoApi) return 0;
    return static_cast<int64_t>(static_cast<uint64_t>(base) + p.start_offset_ns - p.launch_lead_ns + p.api_duration_ns);
  }
  [[gnu::always_inline]] void push_back(const GpuSpan& a) {
    const size_t i = packed.size();
    if ((i & kBlockMask) == 0) block_base.push_back(base_for(a.start_ns));
    packed.push_back(pack(a, base_of(i)));
  }
  // Record i packed again as `a` (its block's base kept).
  void replace(size_t i, const GpuSpan& a) { packed[i] = pack(a, base_of(i)); }
  // Record `from` to position `to` (to < from, compacting), packed again where their bases differ.
  void move_record(size_t from, size_t to) {
    const PackedSpan& p = packed[from];
    if (is_escaped(p) || base_of(from) == base_of(to)) packed[to] = p;
    else replace(to, at(from));
  }
  void reserve(size_t n) { packed.reserve(n); }
  // Appends another file's records after these, its labels and records kept whole renumbered into
  // these tables; returns where they begin. A rank's files joined into one array
  // (report/read/span_chunks.h, where the caller checks that the sums fit: spans_fit_one_array).
  uint32_t append(SpanChunk&& other);
  // Every record's times moved by d (a clock correction; reader_checks.cpp): the bases move, and a
  // record whose times saturate or whose host times become 0 (unknown) is packed again.
  template <class ShiftSpan>
  void shift(int64_t d, ShiftSpan shift_span);
  // The lookups serve packing only: freed once a file is read (about 50 KB a file of 903 kernel
  // names; a chunk packed again later, shifted in time, builds them anew), and wrong once the
  // labels' string ids were renumbered (reader_parallel.cpp).
  void drop_label_lookups() {
    std::vector<uint32_t>().swap(last_label_of_name);
    last_label_unnamed = PackedSpan::kEscaped;
    decltype(label_lookup)().swap(label_lookup);
  }
  // The sizes at one moment, to cut the chunk back to (a window refused after its records were
  // added: labels it added stay, unused).
  struct Mark {
    size_t packed, escaped;
  };
  Mark mark() const { return {packed.size(), escaped.size()}; }
  void truncate(Mark m) {
    packed.resize(std::min(packed.size(), m.packed));
    block_base.resize((packed.size() + kBlockMask) >> kBlockBits);
    escaped.resize(std::min(escaped.size(), m.escaped));
  }

 private:
  struct LabelHash {
    size_t operator()(const Label& l) const {
      uint64_t h = (uint64_t(l.name) << 32 | l.section) * 0x9e3779b97f4a7c15u;
      h ^= (uint64_t(l.stream) << 32 | uint64_t(uint16_t(l.device)) << 16 | uint64_t(l.kind) << 8 | l.nccl) +
           0x7f4a7c159e3779b9u + (h << 6) + (h >> 2);
      return static_cast<size_t>(h);
    }
  };
  // A block's base: 2^31 ns before its first record's start (held inside int64).
  static int64_t base_for(int64_t start) {
    constexpr int64_t kHalf = int64_t{1} << 31;
    return start < INT64_MIN + kHalf ? INT64_MIN : start - kHalf;
  }
  // A name's last label first (a kernel keeps its section and stream for many records in a row),
  // then the table of all: a label costs one load and compare in the reader's loop over every record.
  static constexpr uint32_t kNamesRemembered = 1u << 20;  // beyond (kNone, ids no table holds): the table only
  std::vector<uint32_t> last_label_of_name;  // by name id; others' in last_label_unnamed
  uint32_t last_label_unnamed = PackedSpan::kEscaped;
  std::unordered_map<Label, uint32_t, LabelHash> label_lookup;
  [[gnu::always_inline]] PackedSpan pack(const GpuSpan& a, int64_t base);  // in the reader's loop over every record
  [[gnu::always_inline]] uint32_t label_of(const GpuSpan& a);
  uint32_t find_label(const Label& l, uint32_t& last);
};

[[gnu::always_inline]] inline uint32_t SpanChunk::label_of(const GpuSpan& a) {
  uint32_t* last = &last_label_unnamed;
  if (a.name < last_label_of_name.size()) [[likely]] {
    last = &last_label_of_name[a.name];
  } else if (a.name < kNamesRemembered) {  // ids are dense (a file's strings): grown a few times
    last_label_of_name.resize(std::max<size_t>(size_t(a.name) + 1, 2 * last_label_of_name.size()),
                              PackedSpan::kEscaped);
    last = &last_label_of_name[a.name];
  }
  if (*last < labels.size() &&
      labels[*last].words() == Label::words_of(a)) [[likely]]
    return *last;
  return find_label(Label::of(a), *last);
}

inline uint32_t SpanChunk::find_label(const Label& l, uint32_t& last) {
  auto [it, added] = label_lookup.try_emplace(l, static_cast<uint32_t>(labels.size()));
  if (added) {
    if (labels.size() >= PackedSpan::kEscaped) {  // 65,535 labels: the rest are kept whole
      label_lookup.erase(it);
      return PackedSpan::kEscaped;
    }
    labels.push_back(l);
  }
  last = it->second;
  return it->second;
}

[[gnu::always_inline]] inline PackedSpan SpanChunk::pack(const GpuSpan& a, int64_t base) {
  PackedSpan p;
  const bool api = a.api_start_ns || a.api_end_ns;
  int64_t offset = 0, duration = 0, lead = 0, api_duration = 0;
  bool fits = !__builtin_sub_overflow(a.start_ns, base, &offset) && offset >= 0 && offset <= UINT32_MAX;
  fits &= !__builtin_sub_overflow(a.end_ns, a.start_ns, &duration) && duration >= 0 && duration <= UINT32_MAX;
  if (api) {
    fits &= !__builtin_sub_overflow(a.start_ns, a.api_start_ns, &lead) && lead >= 0 && lead < PackedSpan::kNoApi;
    fits &= !__builtin_sub_overflow(a.api_end_ns, a.api_start_ns, &api_duration) && api_duration >= 0 &&
            api_duration <= UINT16_MAX;
  }
  p.start_offset_ns = static_cast<uint32_t>(offset);
  p.duration_ns = static_cast<uint32_t>(duration);
  p.launch_lead_ns = api ? static_cast<uint32_t>(lead) : PackedSpan::kNoApi;
  p.api_duration_ns = static_cast<uint16_t>(api_duration);
  uint32_t label = PackedSpan::kEscaped;
  if (fits) label = label_of(a);
  // Fits: unpack gives back exactly `a` (each offset was taken without overflow and is added back
  // the same way; known host times stay known, as their offsets are not kNoApi).
  if (fits && label != PackedSpan::kEscaped) {
    p.label = static_cast<uint16_t>(label);
    return p;
  }
  p.label = PackedSpan::kEscaped;
  p.duration_ns = static_cast<uint32_t>(escaped.size());
  escaped.push_back(a);
  return p;
}

template <class ShiftSpan>
void SpanChunk::shift(int64_t d, ShiftSpan shift_span) {
  for (GpuSpan& a : escaped) shift_span(a);
  std::vector<std::pair<size_t, GpuSpan>> again;  // a block's records its moved base cannot hold
  for (size_t b = 0; b < block_base.size(); ++b) {
    const int64_t old_base = block_base[b];
    int64_t new_base;
    if (__builtin_add_overflow(old_base, d, &new_base)) new_base = d > 0 ? INT64_MAX : INT64_MIN;
    again.clear();
    const size_t last = std::min(packed.size(), (b + 1) << kBlockBits);
    for (size_t i = b << kBlockBits; i < last; ++i) {
      if (is_escaped(packed[i])) continue;  // shifted in escaped above
      GpuSpan a = unpack(packed[i], old_base);
      shift_span(a);
      if (!(unpack(packed[i], new_base) == a)) again.emplace_back(i, a);
    }
    block_base[b] = new_base;
    for (const auto& [i, a] : again) replace(i, a);
  }
}

// A window's GpuSpans as values, wherever they are kept (RankData::spans_of): its own array, or a
// range of its rank's SpanChunk.
class SpanRange {
 public:
  SpanRange() = default;
  SpanRange(std::span<const GpuSpan> own) : own_(own.data()), count_(own.size()) {}
  SpanRange(const SpanChunk& chunk, size_t first, size_t count) : chunk_(&chunk), first_(first), count_(count) {}
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  GpuSpan operator[](size_t i) const { return chunk_ ? chunk_->at(first_ + i) : own_[i]; }
  const SpanChunk* chunk() const { return chunk_; }  // null: the window's own array
  size_t first() const { return first_; }

  class iterator {
   public:
    using value_type = GpuSpan;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::forward_iterator_tag;
    iterator() = default;
    iterator(const SpanRange* r, size_t i) : r_(r), i_(i) {}
    GpuSpan operator*() const { return (*r_)[i_]; }
    iterator& operator++() { return ++i_, *this; }
    iterator operator++(int) { iterator old = *this; ++i_; return old; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
   private:
    const SpanRange* r_ = nullptr;
    size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, count_}; }

 private:
  const GpuSpan* own_ = nullptr;
  const SpanChunk* chunk_ = nullptr;
  size_t first_ = 0, count_ = 0;
};

// Per window, per (section, kernel name, grid, block): what GPU scores are computed from.
// 80 bytes: with `graph` last it was 88, and a window of bench/scale's 51 kernels took jemalloc's
// 5 KiB size class instead of 4 (issue 29: 200 MB of the peak at 100,000 ranks of summaries).
struct KernelWindowStats {
  uint32_t section = StringTable::kNone;
  uint32_t name = StringTable::kNone;
  GpuKind kind = GpuKind::kernel;
  bool nccl = false;
  bool graph = false;                     // launched as part of a CUDA graph (kept apart from direct launches)
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0, median_ns = 0;
};
static_assert(sizeof(KernelWindowStats) == 80);

// One NCCL operation as this rank saw it (profiler plugin).
struct Collective {
  uint32_t comm = StringTable::kNone;  // communicator id (hash as hex), the same on all its ranks
  int comm_nranks = 0, comm_rank = -1;
  uint32_t func = StringTable::kNone;  // "AllReduce", "AllGather", ..., "Send", "Recv"
  bool p2p = false;
  int peer = -1;                       // p2p: the other rank (in the communicator)
  uint64_t seq = 0;                    // per communicator and func: matches one op across ranks
  uint64_t count = 0, bytes = 0;
  uint32_t datatype = StringTable::kNone;
  int root = -1;
  uint32_t algo = StringTable::kNone, proto = StringTable::kNone;
  int nchannels = 0;
  int channels = -1;                   // channels whose GPU stop arrived; -1: not recorded (before version 3's column)
  // NCCL's plan upload (its Coll start/stop events, enqueue.cc hostStreamPlanTask): after the kernel
  // launch on the eager path, in a host callback at graph replay. Not the enqueue.
  int64_t upload_start_ns = 0, upload_end_ns = 0;
  int64_t gpu_start_ns = 0, gpu_end_ns = 0;    // earliest channel start, latest channel stop; 0: unknown
                                               // (NCCL's GPU clock, mapped onto the host epoch by the reader)
  // Host epoch ns of the first KernelCh start callback and of the last channel's stop callback
  // (version 4; 0: unknown). A GPU time cannot be later than the callback that reported it.
  int64_t chan_host_start_ns = 0, chan_host_stop_ns = 0;
  // Why its GPU times stay out of blame and of the clock fit (empty: usable): "partial"
  // (channels missing), "after_callback", "out_of_order" (timestamps of other work).
  const char* gpu_time_suspect = nullptr;
  uint32_t comm_name = StringTable::kNone;     // NCCL's commName; kNone when the job gave none
  int comm_nnodes = 0;                         // hosts NCCL counted in the communicator
  // Issue 27 (optional in files): the CUDA device of its communicator (-1: unknown), NCCL's plan
  // (kernel) it ran in, per communicator (0: unknown; ops of one plan share an arrival), and
  // whether NCCL's work counter on its communicator was shifted before it (its GPU times, if
  // any, are another work's).
  int device = -1;
  uint64_t group = 0;
  bool gpu_shifted = false;
};

// One GPU's health over one window (docs/schema.md, "Version 4: GPU health").
struct HealthRange {
  bool present = false;
  double min = 0, median = 0, max = 0;
};
struct GpuHealthSample {
  int device = -1;
  std::string uuid;
  int samples = 0;
  HealthRange sm_clock_mhz, mem_clock_mhz, temperature_c, power_w;
  uint64_t clocks_event_reasons = 0;
  int slowdown_samples = 0;
  int64_t ecc_uncorrected = -1;  // -1: unknown
  int64_t ecc_uncorrected_new = 0;
};

// Schema v5 ("Version 5: late GPU records"): statistics a window's file carries for an earlier
// window, whose records CUPTI delivered only after it closed.
struct LateKernelStats {
  uint64_t window = 0;  // the window they belong to
  KernelWindowStats stats;
};

// A time `laggard ctl` had capture paused (schema version 5, docs/schema.md "Version 5: pause
// and resume"): no data was taken then, which is not data missing.
struct PausedPeriod {
  int64_t start_ns = 0, end_ns = 0;  // epoch ns
  std::string command;               // what paused: "pause", or "window" (an on-demand window was over)
  uint64_t seq = 0;                  // that command's sequence number
  bool ongoing = false;              // still paused at the end of the rank's data
};

// Issue 30 (docs/schema.md, "Issue 30: CPU wait"): how long the rank's threads waited for a CPU
// during a window, from their /proc schedstat.
struct CpuWait {
  uint32_t threads = 0;
  int64_t run_ns = 0, wait_ns = 0, max_thread_wait_ns = 0;
  uint64_t timeslices = 0;
  // The NVTX threads' wait tick by tick (about every 50 ms): each entry from the previous one's
  // end (the window's start for the first) to end_ns (epoch ns). Empty: not recorded.
  uint32_t nvtx_threads = 0;
  std::vector<std::pair<int64_t, int64_t>> nvtx_ticks;  // (end_ns, wait_ns)
};

struct CaptureWindow {
  uint64_t index = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<SectionWindow> sections;
  Counts dropped;
  // GPU (CUPTI). kernel_stats covers every window; gpu holds per-kernel records only for the
  // windows that were sampled (LAGGARD_PROFILING_INTERVAL), see gpu_sampled.
  std::vector<KernelWindowStats> kernel_stats;
  std::vector<LateKernelStats> gpu_late;  // v5: moved into their windows' kernel_stats when read
  std::vector<GpuActivity> gpu;
  // Instead of gpu, read with ReadOptions::compact_gpu: while a file is read, and in models made in
  // memory. The reader then moves a file's spans into one array, its rank's span_chunks[gpu_spans_chunk],
  // where this window's are gpu_spans_count records from gpu_spans_first: read them through
  // RankData::spans_of (issue 29: a rank's records in one array need no pointer each in the analyses).
  std::vector<GpuSpan> gpu_spans;
  uint32_t gpu_spans_chunk = 0, gpu_spans_first = 0, gpu_spans_count = 0;
  bool gpu_sampled = false;
  // Schema v4 (docs/schema.md, "Version 4: CUPTI"): empty / 0 in older files.
  uint64_t gpu_launches = 0;        // launch callbacks seen while GPU capture was on
  std::string gpu_starved;          // CUPTI's records went elsewhere (another CUPTI client), and why
  std::string gpu_shared;           // another CUPTI client held what laggard uses, and what that cost (issue 26)
  uint64_t gpu_missed_launches = 0; // launches whose records laggard did not get because of it
  std::string gpu_clock_problem;    // GPU times of this window are unreliable, and why
  // Version 4, imported Kineto traces: events on a stream that are not GPU activity (CUDA syncs,
  // CPU ops carrying a stream argument), which HTA counts as GPU time; only --hta-compatible uses them.
  std::vector<GpuActivity> stream_events;
  // NCCL (profiler plugin).
  std::vector<Collective> collectives;
  // GPU health (NVML), schema version 4; empty when not sampled.
  std::vector<GpuHealthSample> gpu_health;
  struct P2pCounts {  // version 4: p2p operations are counted per communicator, not listed
    uint32_t comm = StringTable::kNone;
    int comm_nranks = 0, comm_rank = -1;
    uint64_t sends = 0, recvs = 0, send_bytes = 0, recv_bytes = 0;
  };
  std::vector<P2pCounts> p2p;
  int nccl_table = 0;                   // version 4: the plugin table NCCL called init through (0: unknown)
  std::string nccl_kernel_events;       // version 4: "on" or "off: why"
  std::string nccl_displaced;           // issue 27: the profiler plugin laggard displaced ("" none)
  std::vector<PausedPeriod> paused;     // version 5: parts of this window capture was paused
  // Issue 30, optional: the threads' wait for a CPU; null: not measured (not zero). Shared, so a
  // window stays cheap to copy and a run without it pays 16 bytes a window.
  std::shared_ptr<const CpuWait> cpu_wait;
};

struct RankData {
  int rank = -1;
  int local_rank = -1;
  int world_size = -1;
  std::string host;
  long pid = 0;
  long ppid = 0;       // parent process (schema v4; 0: unknown)
  std::string image;   // the process image (issue 24; "" in older files): one pid, many images
  uint64_t started_ticks = 0;  // the kernel's start time of the process: equal across its exec()s
  std::string run_id;
  int64_t process_start_ns = 0;
  int64_t data_end_ns = 0;
  uint64_t windows_lost = 0;  // windows the writer dropped unwritten (schema v4)
  bool final = false;  // the process exited cleanly and wrote its last window
  int signal = 0;      // last flush was caused by this signal
  double flush_s = 0;
  std::string nvtx_status;
  Counts dropped;      // totals over the run
  uint64_t folded_ranges = 0;    // ranges in "(other)" (names past the name table): never scored
  std::string sections_filter;   // LAGGARD_SECTIONS the rank captured with ("" = all)
  int64_t gpu_clock_offset_ns = 0;  // host epoch - GPU timestamp, as measured at start (0: no GPU data)
  std::string cupti_status;         // "on", "off: why", "idle: ..." (empty: schema_version 1)
  std::string nccl_status;          // capture.nccl: "on" (offered to NCCL), "off: why"; empty before version 3
  int64_t nccl_gpu_shift_ns = 0;    // fallback shift applied to this GPU's NCCL times (0: none)
  std::vector<CaptureWindow> windows;  // sorted by index
  // The windows' compact GPU spans, one array per file, each in the file's order (see CaptureWindow::
  // gpu_spans). A window left out after reading leaves its spans here, unreferenced.
  std::vector<SpanChunk> span_chunks;
  SpanRange spans_of(const CaptureWindow& w) const {
    if (!w.gpu_spans.empty() || !w.gpu_spans_count) return SpanRange(w.gpu_spans);
    if (w.gpu_spans_chunk >= span_chunks.size()) return {};  // a window moved to another rank: none of its own
    const SpanChunk& chunk = span_chunks[w.gpu_spans_chunk];
    if (size_t(w.gpu_spans_first) + w.gpu_spans_count > chunk.size()) return {};
    return SpanRange(chunk, w.gpu_spans_first, w.gpu_spans_count);
  }
  std::vector<std::string> files;
  std::vector<PausedPeriod> paused;  // version 5: the windows' paused parts, joined across windows
  int64_t import_time_base_ns = -1;  // version 4, imported Kineto trace: its baseTimeNanoseconds (0: none); -1: not imported
};

struct Problem {
  std::string kind;  // missing_rank, unreadable_file, incomplete_rank, duplicate_rank, ...
  int rank = -1;     // -1: not about one rank
  std::string file;
  std::string message;
};

struct RunModel {
  StringTable strings;  // for GpuActivity, KernelWindowStats and Collective fields
  std::string dir;
  std::string run_id;
  int world_size = -1;
  std::vector<RankData> ranks;  // sorted by rank, one per rank
  std::vector<Problem> problems;
  std::vector<std::string> other_runs;  // run ids found beside this one in the same directory
  // The hang reports (hang-*.json) in dir, listed with its rank files by read_run; nullopt: not
  // listed (a model made otherwise), the report looks for them itself.
  std::optional<std::vector<std::string>> hang_reports;
};

}  // namespace laggard::report
