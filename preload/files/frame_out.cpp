#include "frame_out.h"

#include <dlfcn.h>

#include <array>
#include <cstring>
#include <vector>

#include "fork_gate.h"

namespace laggard {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A column: one byte giving the width every value takes (1, 2, 4 or 8), then the values.
void put_column(std::string& out, const std::vector<uint64_t>& values) {
  uint64_t max = 0;
  for (uint64_t v : values) max |= v;
  uint8_t width = max <= 0xff ? 1 : max <= 0xffff ? 2 : max <= 0xffffffffu ? 4 : 8;
  out.push_back(static_cast<char>(width));
  size_t at = out.size();
  out.resize(at + values.size() * width);
  for (uint64_t v : values) {
    for (uint8_t b = 0; b < width; ++b) out[at + b] = static_cast<char>((v >> (8 * b)) & 0xff);
    at += width;
  }
}

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

// Index + 1, 0 for none (kNoString / -1), so "none" costs no wider column.
template <class T>
uint64_t plus_one(T v, T none) { return v == none ? 0 : static_cast<uint64_t>(v) + 1; }

template <class T, class F>
std::vector<uint64_t> column(const std::vector<T>& xs, F f) {
  std::vector<uint64_t> out;
  out.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) out.push_back(f(i));
  return out;
}

// libzstd's stable API (zstd.h, ZSTD_compress / ZSTD_compressBound / ZSTD_isError), loaded at
// run time so a host without libzstd.so.1 still runs, writing frames raw.
struct Zstd {
  size_t (*bound)(size_t) = nullptr;
  size_t (*compress)(void*, size_t, const void*, size_t, int) = nullptr;
  unsigned (*is_error)(size_t) = nullptr;
  bool ok() const { return bound && compress && is_error; }
};

const Zstd& zstd() {
  static const Zstd z = [] {
    Zstd r;
    void* h = load_library("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return r;
    r.bound = reinterpret_cast<size_t (*)(size_t)>(::dlsym(h, "ZSTD_compressBound"));
    r.compress = reinterpret_cast<size_t (*)(void*, size_t, const void*, size_t, int)>(::dlsym(h, "ZSTD_compress"));
    r.is_error = reinterpret_cast<unsigned (*)(size_t)>(::dlsym(h, "ZSTD_isError"));
    return r;
  }();
  return z;
}

constexpr int kZstdLevel = 3;  // zstd's default: ~300 MB/s on the flush thread

// Compresses `raw`; empty when libzstd is missing or it would not shrink.
std::string compress(const std::string& raw) {
  const Zstd& z = zstd();
  if (!z.ok()) return {};
  std::string out(z.bound(raw.size()), '\0');
  size_t n = z.compress(out.data(), out.size(), raw.data(), raw.size(), kZstdLevel);
  if (z.is_error(n) || n >= raw.size()) return {};
  out.resize(n);
  return out;
}

}  // namespace

uint32_t crc32_of(std::string_view data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = kCrcTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

bool frames_compressed() { return zstd().ok(); }

std::string encode_gpu_records(const GpuRecords& r, int64_t window_start_ns) {
  std::string out;
  const size_t n = r.size();
  put_u32(out, static_cast<uint32_t>(n));
  put_u32(out, static_cast<uint32_t>(r.shapes.size()));
  for (const auto& s : r.shapes)
    for (uint32_t v : s) put_u32(out, v);
  put_column(out, column(r.kind, [&](size_t i) { return uint64_t{r.kind[i]}; }));
  put_column(out, column(r.flags, [&](size_t i) { return uint64_t{r.flags[i]}; }));
  put_column(out, column(r.copy_kind, [&](size_t i) { return uint64_t{r.copy_kind[i]}; }));
  put_column(out, column(r.name, [&](size_t i) { return plus_one(r.name[i], kNoString); }));
  put_column(out, column(r.section, [&](size_t i) { return plus_one(r.section[i], kNoString); }));
  // Starts in GPU order: each as the change from the previous one (from the window start for the first).
  put_column(out, column(r.start_ns, [&](size_t i) {
    return zigzag(r.start_ns[i] - (i ? r.start_ns[i - 1] : window_start_ns));
  }));
  put_column(out, column(r.dur_ns, [&](size_t i) { return zigzag(r.dur_ns[i]); }));
  // The launching call: its start relative to the GPU start, its duration + 1 (0: unknown).
  put_column(out, column(r.api_start_ns, [&](size_t i) {
    return r.api_dur_ns[i] < 0 ? 0 : zigzag(r.api_start_ns[i] - r.start_ns[i]);
  }));
  put_column(out, column(r.api_dur_ns, [&](size_t i) {
    return r.api_dur_ns[i] < 0 ? 0 : static_cast<uint64_t>(r.api_dur_ns[i]) + 1;
  }));
  put_column(out, column(r.tid, [&](size_t i) { return uint64_t{r.tid[i]}; }));
  put_column(out, column(r.correlation, [&](size_t i) {
    return zigzag(int64_t{r.correlation[i]} - (i ? int64_t{r.correlation[i - 1]} : 0));
  }));
  put_column(out, column(r.device, [&](size_t i) { return plus_one(r.device[i], -1); }));
  put_column(out, column(r.stream, [&](size_t i) { return uint64_t{r.stream[i]}; }));
  put_column(out, column(r.shape, [&](size_t i) { return plus_one(r.shape[i], -1); }));
  put_column(out, column(r.bytes, [&](size_t i) { return r.bytes[i]; }));
  return out;
}

std::string encode_gpu_block(const GpuWindow& g, int64_t window_start_ns) {
  std::string out = encode_gpu_records(g.records, window_start_ns);
  const std::vector<GpuKernelStats>& k = g.kernels;
  put_u32(out, static_cast<uint32_t>(k.size()));
  put_column(out, column(k, [&](size_t i) { return plus_one(k[i].section, kNoString); }));
  put_column(out, column(k, [&](size_t i) { return plus_one(k[i].name, kNoString); }));
  put_column(out, column(k, [&](size_t i) { return uint64_t(k[i].kind); }));
  put_column(out, column(k, [&](size_t i) {
    return uint64_t((k[i].nccl ? kGpuFlagNccl : 0) | (k[i].graph ? kGpuFlagGraph : 0));
  }));
  for (size_t d = 0; d < 3; ++d) put_column(out, column(k, [&](size_t i) { return uint64_t{k[i].grid[d]}; }));
  for (size_t d = 0; d < 3; ++d) put_column(out, column(k, [&](size_t i) { return uint64_t{k[i].block[d]}; }));
  put_column(out, column(k, [&](size_t i) { return k[i].count; }));
  put_column(out, column(k, [&](size_t i) { return zigzag(k[i].total_ns); }));
  put_column(out, column(k, [&](size_t i) { return zigzag(k[i].min_ns); }));
  put_column(out, column(k, [&](size_t i) { return zigzag(k[i].max_ns); }));
  put_column(out, column(k, [&](size_t i) { return zigzag(k[i].median_ns); }));
  return out;
}

std::string encode_frame(std::string_view header_json, std::string_view window_json,
                         std::string_view gpu_records) {
  std::string raw;
  raw.reserve(12 + header_json.size() + window_json.size() + gpu_records.size());
  for (std::string_view part : {header_json, window_json, gpu_records}) {
    put_u32(raw, static_cast<uint32_t>(part.size()));
    raw.append(part);
  }
  std::string packed = compress(raw);
  const std::string& stored = packed.empty() ? raw : packed;
  std::string frame(kFrameMagic, sizeof kFrameMagic);
  frame.push_back(static_cast<char>(packed.empty() ? kFrameRaw : kFrameZstd));
  frame.append(3, '\0');
  put_u32(frame, static_cast<uint32_t>(stored.size()));
  put_u32(frame, static_cast<uint32_t>(raw.size()));
  put_u32(frame, crc32_of(stored));
  frame += stored;
  return frame;
}

}  // namespace laggard
