#include "reader_frames.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include "reader_values.h"

namespace laggard::report {
namespace {

constexpr char kMagic[4] = {'L', 'G', 'F', '5'};
constexpr size_t kFrameHead = 20;  // magic, compression + 3 reserved, stored, raw, crc32
constexpr uint32_t kMaxFrameRaw = 256u << 20;

uint32_t le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Little-endian unsigned of 1, 2, 4 or 8 bytes (the widths BlockReader::column accepts). Read
// for every field of every record: one load where the machine is little-endian.
template <typename T>
uint64_t load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline uint64_t le(const char* p, unsigned width) {
  if constexpr (std::endian::native == std::endian::little) {
    switch (width) {
      case 1: return static_cast<unsigned char>(*p);
      case 2: return load_le<uint16_t>(p);
      case 4: return load_le<uint32_t>(p);
      case 8: return load_le<uint64_t>(p);
    }
  }
  uint64_t v = 0;
  for (int i = static_cast<int>(width) - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// The frame at some offset, decompressed, or what is wrong with it.
struct Payload {
  std::string_view bytes;  // into the file's text, or into the thread's frame buffer
  size_t frame_size = 0;   // head + stored bytes
  std::string problem;     // empty: whole and checked
};

Payload fail(std::string why) { return {{}, 0, std::move(why)}; }

// Each thread decompresses every frame into one buffer, kept from frame to frame and file to
// file unless a frame was unusually large: a new buffer per frame is fresh memory the kernel must
// fault in and zero page by page (about 14 us per 4 KiB page on a VM, issue 29).
std::string& frame_buffer() {
  thread_local std::string buffer;
  constexpr size_t kKeep = size_t{64} << 20;
  if (buffer.capacity() > kKeep) std::string().swap(buffer);
  return buffer;
}

Payload frame_payload(std::string_view text, size_t at) {
  if (text.size() - at < kFrameHead) return fail("a frame header cut off");
  const char* h = text.data() + at;
  if (std::memcmp(h, kMagic, 4) != 0) return fail("no frame starts here");
  uint8_t compression = static_cast<uint8_t>(h[4]);
  uint32_t stored = le32(h + 8), raw = le32(h + 12), crc = le32(h + 16);
  if (stored > text.size() - at - kFrameHead) return fail("a frame cut off");
  std::string_view body = text.substr(at + kFrameHead, stored);
  if (static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))) != crc)
    return fail("a frame whose checksum does not match");
  if (raw > kMaxFrameRaw) return fail("a frame larger than 256 MiB");
  Payload p;
  p.frame_size = kFrameHead + stored;
  if (compression == 0) {
    if (raw != stored) return fail("a frame of inconsistent size");
    p.bytes = body;
    return p;
  }
  if (compression != 1) return fail(fmt::format("a frame of unknown compression {}", compression));
  std::string& buffer = frame_buffer();
  if (buffer.size() < raw) buffer.resize(raw);
  // One context per thread: ZSTD_decompress() would allocate (and page in) a new one per frame.
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) return fail("a frame that cannot be decompressed here (out of memory)");
  size_t n = ZSTD_decompressDCtx(dctx.get(), buffer.data(), raw, body.data(), body.size());
  if (ZSTD_isError(n) || n != raw) return fail("a frame that does not decompress");
  p.bytes = std::string_view(buffer.data(), raw);
  return p;
}

// Splits a payload into its three length-prefixed parts.
bool split_payload(std::string_view p, FrameParts& parts) {
  std::string_view* out[3] = {&parts.header_json, &parts.window_json, &parts.gpu_records};
  for (std::string_view* part : out) {
    if (p.size() < 4) return false;
    uint32_t n = le32(p.data());
    if (n > p.size() - 4) return false;
    *part = p.substr(4, n);
    p.remove_prefix(4 + n);
  }
  return p.empty();
}

// Reads a records block front to back, refusing to run past its end.
class BlockReader {
 public:
  explicit BlockReader(std::string_view b) : b_(b) {}
  uint32_t u32() {
    need(4);
    uint32_t v = le32(b_.data() + at_);
    at_ += 4;
    return v;
  }
  struct Column {
    const char* data;
    unsigned width;
    uint64_t operator[](size_t i) const { return le(data + i * width, width); }
  };
  Column column(size_t n) {
    need(1);
    unsigned width = static_cast<unsigned char>(b_[at_++]);
    if (width != 1 && width != 2 && width != 4 && width != 8) throw std::runtime_error("GPU records: bad column width");
    if (n > (b_.size() - at_) / width) throw std::runtime_error("GPU records: column cut off");
    Column c{b_.data() + at_, width};
    at_ += n * width;
    return c;
  }
  size_t left() const { return b_.size() - at_; }

 private:
  void need(size_t n) const {
    if (b_.size() - at_ < n) throw std::runtime_error("GPU records: block cut off");
  }
  std::string_view b_;
  size_t at_ = 0;
};

// DecodeGpuAsSpans, DecodeSpansInto: set for the parse running on this thread.
thread_local bool gpu_as_spans = false;
thread_local SpanChunk* span_sink = nullptr;
thread_local size_t span_sink_most = 0;  // records the sink's file could hold at most (DecodeSpansInto)

int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// The checks run on every field of every record: the throw stays out of line.
template <typename V>
[[noreturn, gnu::noinline, gnu::cold]] void throw_out_of_range(const char* what, V v) {
  throw std::runtime_error(fmt::format("{} {} is out of range", what, v));
}

[[gnu::always_inline]] inline uint64_t at_most(uint64_t v, uint64_t hi, const char* what) {
  if (v > hi) [[unlikely]] throw_out_of_range(what, v);
  return v;
}

[[gnu::always_inline]] inline int64_t offset_checked(int64_t v, const char* what) {
  if (v < -values::kMaxDurNs || v > values::kMaxDurNs) [[unlikely]] throw_out_of_range(what, v);
  return v;
}

[[noreturn, gnu::noinline, gnu::cold]] void throw_bad_string_index() {
  throw std::runtime_error("GPU string index out of range");
}

[[gnu::always_inline]] inline uint32_t string_id(const std::vector<uint32_t>& ids, uint64_t plus_one) {
  if (plus_one == 0) return StringTable::kNone;
  if (plus_one > ids.size()) [[unlikely]] throw_bad_string_index();
  return ids[plus_one - 1];
}

struct Shape {
  uint32_t v[6];
};

std::vector<Shape> read_shapes(BlockReader& in, uint32_t n_shapes) {
  if (n_shapes > in.left() / 24) throw std::runtime_error("GPU records: shapes cut off");
  std::vector<Shape> shapes(n_shapes);
  for (Shape& s : shapes)
    for (uint32_t& v : s.v) v = in.u32();
  return shapes;
}

// A column's values widened to 64 bits in one pass, its width switched on once rather than at every
// field of every record (issue 29: the per-field switch was most of the 230 instructions a record
// took to decode).
// Vectorized where built at -O2 too (GCC 12 vectorizes only at -O3 or when asked).
template <typename T>
[[gnu::optimize("tree-vectorize")]] void widen_as(const char* p, size_t n, uint64_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = load_le<T>(p + i * sizeof(T));
}

void widen(const BlockReader::Column& c, size_t n, uint64_t* out) {
  if constexpr (std::endian::native == std::endian::little) {
    switch (c.width) {
      case 1: return widen_as<uint8_t>(c.data, n, out);
      case 2: return widen_as<uint16_t>(c.data, n, out);
      case 4: return widen_as<uint32_t>(c.data, n, out);
      case 8: return widen_as<uint64_t>(c.data, n, out);
    }
  }
  for (size_t i = 0; i < n; ++i) out[i] = c[i];
}

// The columns in file order (docs/schema.md, "Version 5: binary kernel records"), as stored: each
// checked to hold the block's records before any is read.
struct RawColumns {
  static constexpr size_t kCount = 15;
  BlockReader::Column col[kCount];
};

RawColumns read_raw_columns(BlockReader& in, size_t n) {
  RawColumns raw;
  for (BlockReader::Column& c : raw.col) c = in.column(n);
  return raw;
}

// A batch of records of every column, widened into a buffer this thread keeps. Small enough that the
// widened values (30 KB) are still in the core's first-level cache when they are decoded: a window's
// block of 20,000 records widened at once took 2.4 MB, more than these machines' 2 MB of L2 (issue 29:
// 256 and 128 records a batch took 9 % less of the reading stage's CPU at 960 ranks, 2,048 records 6 %).
struct Columns {
  static constexpr size_t kBatch = 256;
  const uint64_t *kind, *flags, *copy_kind, *name, *section, *start, *dur, *api_start, *api_dur, *tid, *correlation,
      *device, *stream, *shape, *bytes;
};

Columns widen_batch(const RawColumns& raw, size_t first, size_t count) {
  thread_local std::vector<uint64_t> wide(RawColumns::kCount * Columns::kBatch);
  Columns c{};
  const uint64_t** out[RawColumns::kCount] = {&c.kind, &c.flags, &c.copy_kind, &c.name, &c.section,
                                              &c.start, &c.dur, &c.api_start, &c.api_dur, &c.tid,
                                              &c.correlation, &c.device, &c.stream, &c.shape, &c.bytes};
  for (size_t k = 0; k < RawColumns::kCount; ++k) {
    const BlockReader::Column& column = raw.col[k];
    uint64_t* into = wide.data() + k * Columns::kBatch;
    widen(BlockReader::Column{column.data + first * column.width, column.width}, count, into);
    *out[k] = into;
  }
  return c;
}

}  // namespace

DecodeGpuAsSpans::DecodeGpuAsSpans(bool on) : previous_(gpu_as_spans) { gpu_as_spans = on; }
DecodeGpuAsSpans::~DecodeGpuAsSpans() { gpu_as_spans = previous_; }
bool decoding_gpu_as_spans() { return gpu_as_spans; }

DecodeSpansInto::DecodeSpansInto(SpanChunk& chunk, size_t most_records)
    : previous_(span_sink), previous_most_(span_sink_most) {
  span_sink = &chunk;
  span_sink_most = most_records;
}
DecodeSpansInto::~DecodeSpansInto() {
  span_sink = previous_;
  span_sink_most = previous_most_;
}

// Each record takes at least a byte in each column of its frame's decompressed payload. The frames'
// own sizes are trusted no further than one record per 4 bytes of the file (laggard's files hold
// about one per 9): a damaged header claiming 256 MiB frames cannot make the reader reserve more than
// 4 times the file. Past that bound, the array grows by doubling.
size_t most_gpu_records(std::string_view text) {
  size_t raw_total = 0;
  for (size_t at = 0; text.size() - at >= kFrameHead && std::memcmp(text.data() + at, kMagic, 4) == 0;) {
    const uint32_t stored = le32(text.data() + at + 8), raw = le32(text.data() + at + 12);
    if (stored > text.size() - at - kFrameHead) break;
    raw_total += raw;
    at += kFrameHead + stored;
  }
  return std::min(raw_total / RawColumns::kCount, text.size() / 4);
}

bool is_frame_file(std::string_view text) { return text.size() >= 4 && std::memcmp(text.data(), kMagic, 4) == 0; }

FrameScan scan_frames(std::string_view text, const std::function<void(const FrameParts&)>& on_frame) {
  FrameScan scan;
  size_t at = 0;
  while (at < text.size()) {
    Payload payload = frame_payload(text, at);
    FrameParts parts;
    std::string why = std::move(payload.problem);
    if (why.empty() && !split_payload(payload.bytes, parts)) why = "a frame whose parts do not add up";
    if (!why.empty()) {
      scan.torn_tail = fmt::format("the last {} bytes (from byte {}) are {} (a write cut short by a crash or a "
                                   "full disk); the {} whole window(s) before them are read",
                                   text.size() - at, at, why, scan.frames);
      break;
    }
    on_frame(parts);
    ++scan.frames;
    at += payload.frame_size;
  }
  return scan;
}

namespace {

int64_t dur_checked(uint64_t zz, const char* what) {
  int64_t v = unzigzag(zz);
  if (v < 0 || v > values::kMaxDurNs) throw std::runtime_error(fmt::format("{} {} is out of range", what, v));
  return v;
}

// A block's records before decoding: their count, the launch shapes and the columns.
struct RecordBlock {
  uint32_t n;
  std::vector<Shape> shapes;
  RawColumns raw;
};

RecordBlock read_record_block(BlockReader& in) {
  RecordBlock b;
  b.n = in.u32();
  b.shapes = read_shapes(in, in.u32());
  if (b.n > in.left() / RawColumns::kCount)  // each column holds at least a byte per record
    throw std::runtime_error("GPU records: more records than the block holds");
  b.raw = read_raw_columns(in, b.n);
  return b;
}

// Where the record before the next one left off: its start and correlation id (both delta-coded).
struct RecordCursor {
  int64_t start;
  uint32_t correlation = 0;
};

// Record i of the block into `a`: GpuActivity (every field) or GpuSpan (what the report's analyses
// read), with the same checks in the same order either way, so a file is refused alike whichever it
// is read into. c: the batch's columns (widen_batch), i: the record's place in the batch.
template <typename Record>
[[gnu::always_inline]] inline void decode_record(const RecordBlock& b, const Columns& c, size_t i, int64_t window_start,
                                                 const std::vector<uint32_t>& ids, RecordCursor& at, Record& a) {
  constexpr bool kFull = std::is_same_v<Record, GpuActivity>;
  uint64_t k = c.kind[i];
  a.kind = k == 1 ? GpuKind::memcpy : k == 2 ? GpuKind::memset : GpuKind::kernel;
  a.name = string_id(ids, c.name[i]);
  a.section = string_id(ids, c.section[i]);
  at.start += offset_checked(unzigzag(c.start[i]), "gpu.records start delta");
  const int64_t start = at.start;
  offset_checked(start - window_start, "gpu.records start offset");
  if (start < 0) throw std::runtime_error("GPU record before 1970");
  a.start_ns = start;
  int64_t dur = unzigzag(c.dur[i]);
  a.end_ns = start + static_cast<int64_t>(at_most(static_cast<uint64_t>(dur < 0 ? -1 : dur), values::kMaxDurNs,
                                                  "gpu.records dur_ns"));
  if (uint64_t ad = c.api_dur[i]; ad > 0) {
    a.api_start_ns = start + offset_checked(unzigzag(c.api_start[i]), "gpu.records api start");
    a.api_end_ns = a.api_start_ns + static_cast<int64_t>(at_most(ad - 1, values::kMaxDurNs, "gpu.records api_dur_ns"));
  }
  const auto tid = static_cast<uint32_t>(at_most(c.tid[i], UINT32_MAX, "gpu.records tid"));
  at.correlation += static_cast<uint32_t>(unzigzag(c.correlation[i]));
  a.device = static_cast<decltype(a.device)>(at_most(c.device[i], kMaxGpuDevice + 1, "gpu.records device") - 1);
  a.stream = static_cast<uint32_t>(at_most(c.stream[i], UINT32_MAX, "gpu.records stream"));
  const uint64_t sh = c.shape[i];
  if (sh > b.shapes.size()) throw std::runtime_error("GPU shape index out of range");
  const uint64_t bytes = at_most(c.bytes[i], values::kMaxCount, "gpu.records bytes");
  const auto copy_kind = static_cast<uint8_t>(at_most(c.copy_kind[i], 255, "gpu.records copy_kind"));
  uint64_t f = c.flags[i];
  a.nccl = f & 1u;
  if constexpr (kFull) {
    a.api_tid = tid;
    a.correlation = at.correlation;
    if (sh > 0) {
      const Shape& s = b.shapes[sh - 1];
      for (int d = 0; d < 3; ++d) {
        a.grid[d] = s.v[d];
        a.block[d] = s.v[d + 3];
      }
    }
    a.bytes = bytes;
    a.copy_kind = copy_kind;
    a.graph = f & 2u;
  }
}

// Runs `undo` when destroyed before `done` is set: a block refused by a throw half-way.
template <typename Undo>
struct UndoUnlessDone {
  explicit UndoUnlessDone(Undo u) : undo(std::move(u)) {}
  ~UndoUnlessDone() {
    if (!done) undo();
  }
  UndoUnlessDone(const UndoUnlessDone&) = delete;
  UndoUnlessDone& operator=(const UndoUnlessDone&) = delete;
  Undo undo;
  bool done = false;
};

// Record i of the block, for i in order: each(i, decode), where decode(record) fills a Record.
template <typename Record, typename Each>
[[gnu::always_inline]] inline void decode_in_batches(const RecordBlock& b, int64_t window_start,
                                                     const std::vector<uint32_t>& ids, Each&& each) {
  RecordCursor at{window_start};
  for (size_t first = 0; first < b.n; first += Columns::kBatch) {
    const size_t count = std::min<size_t>(Columns::kBatch, b.n - first);
    const Columns c = widen_batch(b.raw, first, count);
    for (size_t i = 0; i < count; ++i)
      each(first + i, [&](Record& a) { decode_record(b, c, i, window_start, ids, at, a); });
  }
}

// The block's records appended to `out`, an array of the window's own.
template <typename Record>
void decode_gpu_records(const RecordBlock& b, int64_t window_start, const std::vector<uint32_t>& ids,
                        std::vector<Record>& out) {
  // Sized once and written in place (a push_back per record was a quarter of the decoding); a
  // block refused half-way takes its records back out.
  const size_t before = out.size();
  out.resize(before + b.n);
  UndoUnlessDone take_back([&] { out.resize(before); });
  decode_in_batches<Record>(b, window_start, ids, [&](size_t i, auto&& decode) { decode(out[before + i]); });
  take_back.done = true;
}

// The block's records packed straight into the file's array (DecodeSpansInto), the window given
// their place in it: no GpuSpan array per window to fill, copy and free (issue 29: that was 60
// bytes written and read again per record, and a tenth of the decoding's instructions).
void decode_gpu_records(const RecordBlock& b, int64_t window_start, const std::vector<uint32_t>& ids, SpanChunk& out,
                        CaptureWindow& w) {
  const SpanChunk::Mark before = out.mark();
  // Room made without zeroing it first (resize() would write every record twice: 2.7 % of the reading
  // stage was that memset at 960 ranks), at once for every record the file can hold (DecodeSpansInto):
  // grown by doubling, each file's records were copied once or twice on the way and a new array
  // faulted in each time (issue 29). Room never written is address space only, never memory.
  if (out.packed.capacity() < before.packed + b.n)
    out.packed.reserve(std::max({before.packed + b.n, 2 * out.packed.capacity(), span_sink_most}));
  UndoUnlessDone take_back([&] { out.truncate(before); });
  decode_in_batches<GpuSpan>(b, window_start, ids, [&](size_t, auto&& decode) {
    GpuSpan a{};
    decode(a);
    out.push_back(a);
  });
  take_back.done = true;
  w.gpu_spans_first = static_cast<uint32_t>(before.packed);
  w.gpu_spans_count = b.n;
}

// The kernel statistics after the records (docs/schema.md, "Version 5: binary kernel records").
void decode_kernel_stats(BlockReader& in, const std::vector<uint32_t>& ids, std::vector<KernelWindowStats>& out) {
  uint32_t n = in.u32();
  if (n > in.left() / 16) throw std::runtime_error("GPU kernel statistics: more than the block holds");
  BlockReader::Column section = in.column(n), name = in.column(n), kind = in.column(n), flags = in.column(n);
  BlockReader::Column grid[3] = {in.column(n), in.column(n), in.column(n)};
  BlockReader::Column block[3] = {in.column(n), in.column(n), in.column(n)};
  BlockReader::Column count = in.column(n), total = in.column(n), min = in.column(n), max = in.column(n),
                      median = in.column(n);
  out.reserve(out.size() + n);
  for (size_t i = 0; i < n; ++i) {
    KernelWindowStats st;
    st.section = string_id(ids, section[i]);
    st.name = string_id(ids, name[i]);
    uint64_t k = kind[i];
    st.kind = k == 1 ? GpuKind::memcpy : k == 2 ? GpuKind::memset : GpuKind::kernel;
    st.nccl = flags[i] & 1u;
    st.graph = flags[i] & 2u;
    for (int d = 0; d < 3; ++d) {
      st.grid[d] = static_cast<uint32_t>(at_most(grid[d][i], UINT32_MAX, "gpu.kernels grid"));
      st.block[d] = static_cast<uint32_t>(at_most(block[d][i], UINT32_MAX, "gpu.kernels block"));
    }
    st.count = at_most(count[i], values::kMaxCount, "gpu.kernels count");
    st.total_ns = dur_checked(total[i], "gpu.kernels total_ns");
    st.min_ns = dur_checked(min[i], "gpu.kernels min_ns");
    st.max_ns = dur_checked(max[i], "gpu.kernels max_ns");
    st.median_ns = dur_checked(median[i], "gpu.kernels median_ns");
    out.push_back(st);
  }
}

}  // namespace

size_t decode_gpu_block(std::string_view block, int64_t window_start, const std::vector<uint32_t>& ids,
                        CaptureWindow& out) {
  BlockReader in(block);
  const RecordBlock records = read_record_block(in);
  // Positions in a SpanChunk are 32-bit (CaptureWindow::gpu_spans_first): past that, the window keeps its own.
  const bool fits_sink = span_sink && out.gpu_spans.empty() && !out.gpu_spans_count &&
                         span_sink->size() + records.n <= UINT32_MAX;
  if (gpu_as_spans && fits_sink) decode_gpu_records(records, window_start, ids, *span_sink, out);
  else if (gpu_as_spans) decode_gpu_records(records, window_start, ids, out.gpu_spans);
  else decode_gpu_records(records, window_start, ids, out.gpu);
  decode_kernel_stats(in, ids, out.kernel_stats);
  if (in.left()) throw std::runtime_error("GPU block: bytes left over");
  return records.n;
}

}  // namespace laggard::report
