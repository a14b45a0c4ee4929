#include "import_frames.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

namespace laggard::report {
namespace {
namespace frames {  // own names: a unity build puts other files' anonymous helpers beside these

using nlohmann::json;

constexpr char kMagic[4] = {'L', 'G', 'F', '5'};
constexpr int kZstdLevel = 3;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A column: one byte giving the width every value takes (1, 2, 4 or 8), then the values.
void put_column(std::string& out, const std::vector<uint64_t>& values) {
  uint64_t max = 0;
  for (uint64_t v : values) max |= v;
  const unsigned width = max <= 0xff ? 1 : max <= 0xffff ? 2 : max <= 0xffffffffu ? 4 : 8;
  out.push_back(static_cast<char>(width));
  size_t at = out.size();
  out.resize(at + values.size() * width);
  for (uint64_t v : values) {
    for (unsigned b = 0; b < width; ++b) out[at + b] = static_cast<char>((v >> (8 * b)) & 0xff);
    at += width;
  }
}

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

int64_t whole(const json& v, const char* what) {
  if (!v.is_number_integer()) throw std::invalid_argument(fmt::format("{} is not a whole number", what));
  return v.get<int64_t>();
}

// An index as JSON writes it (a number, or null / -1 for none) as the frame stores it: + 1, 0 for none.
uint64_t index_plus_one(const json& v, const char* what) {
  if (v.is_null()) return 0;
  const int64_t i = whole(v, what);
  return i < 0 ? 0 : static_cast<uint64_t>(i) + 1;
}

const json& column(const json& records, const char* name, size_t n) {
  static const json kEmpty = json::array();
  if (n == 0 && !records.contains(name)) return kEmpty;  // a window without records
  const json& c = records.at(name);
  if (!c.is_array() || c.size() != n) throw std::invalid_argument(fmt::format("records.{} differs in length", name));
  return c;
}

template <class F>
std::vector<uint64_t> values(size_t n, F f) {
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = f(i);
  return out;
}

void put_records(std::string& out, const json& r) {
  const size_t n = r.contains("kind") ? r.at("kind").size() : 0;
  const json &kind = column(r, "kind", n), &name = column(r, "name", n), &section = column(r, "section", n),
             &start = column(r, "start_offset_ns", n), &dur = column(r, "dur_ns", n),
             &api_start = column(r, "api_start_offset_ns", n), &api_dur = column(r, "api_dur_ns", n),
             &tid = column(r, "tid", n), &corr = column(r, "correlation", n), &device = column(r, "device", n),
             &stream = column(r, "stream", n), &shape = column(r, "shape", n), &bytes = column(r, "bytes", n),
             &copy = column(r, "copy_kind", n), &flags = column(r, "flags", n);
  const json shapes = r.value("shapes", json::array());
  put_u32(out, static_cast<uint32_t>(n));
  put_u32(out, static_cast<uint32_t>(shapes.size()));
  for (const json& s : shapes)
    for (size_t d = 0; d < 6; ++d) put_u32(out, static_cast<uint32_t>(whole(s.at(d), "records.shapes")));
  auto plain = [&](const json& c, const char* what) {
    return values(n, [&](size_t i) { return static_cast<uint64_t>(whole(c[i], what)); });
  };
  put_column(out, plain(kind, "records.kind"));
  put_column(out, plain(flags, "records.flags"));
  put_column(out, plain(copy, "records.copy_kind"));
  put_column(out, values(n, [&](size_t i) { return index_plus_one(name[i], "records.name"); }));
  put_column(out, values(n, [&](size_t i) { return index_plus_one(section[i], "records.section"); }));
  // Starts as the change from the previous record's (the first: from the window's start).
  put_column(out, values(n, [&](size_t i) {
    return zigzag(whole(start[i], "records.start_offset_ns") - (i ? whole(start[i - 1], "") : 0));
  }));
  put_column(out, values(n, [&](size_t i) { return zigzag(whole(dur[i], "records.dur_ns")); }));
  // The launching call: its start relative to the GPU start, its duration + 1 (0: unknown).
  put_column(out, values(n, [&](size_t i) {
    return whole(api_dur[i], "records.api_dur_ns") < 0
               ? 0
               : zigzag(whole(api_start[i], "records.api_start_offset_ns") - whole(start[i], ""));
  }));
  put_column(out, values(n, [&](size_t i) {
    const int64_t d = whole(api_dur[i], "records.api_dur_ns");
    return d < 0 ? 0 : static_cast<uint64_t>(d) + 1;
  }));
  put_column(out, plain(tid, "records.tid"));
  put_column(out, values(n, [&](size_t i) {
    return zigzag(whole(corr[i], "records.correlation") - (i ? whole(corr[i - 1], "") : 0));
  }));
  put_column(out, values(n, [&](size_t i) { return index_plus_one(device[i], "records.device"); }));
  put_column(out, plain(stream, "records.stream"));
  put_column(out, values(n, [&](size_t i) { return index_plus_one(shape[i], "records.shape"); }));
  put_column(out, plain(bytes, "records.bytes"));
}

uint64_t kind_code(const json& k) {
  const std::string s = k.is_string() ? k.get<std::string>() : "kernel";
  return s == "memcpy" ? 1 : s == "memset" ? 2 : 0;
}

void put_kernels(std::string& out, const json& kernels) {
  const size_t k = kernels.size();
  put_u32(out, static_cast<uint32_t>(k));
  auto col = [&](auto f) { return values(k, [&](size_t i) { return f(kernels[i]); }); };
  put_column(out, col([](const json& s) { return index_plus_one(s.value("section", json()), "kernels.section"); }));
  put_column(out, col([](const json& s) { return index_plus_one(s.at("name"), "kernels.name"); }));
  put_column(out, col([](const json& s) { return kind_code(s.value("kind", json())); }));
  put_column(out, col([](const json& s) {
    return uint64_t{s.value("nccl", false) ? 1u : 0u} | uint64_t{s.value("graph", false) ? 2u : 0u};
  }));
  for (const char* dims : {"grid", "block"})
    for (size_t d = 0; d < 3; ++d)
      put_column(out, col([&](const json& s) { return static_cast<uint64_t>(whole(s.at(dims).at(d), dims)); }));
  put_column(out, col([](const json& s) { return static_cast<uint64_t>(whole(s.at("count"), "kernels.count")); }));
  for (const char* key : {"total_ns", "min_ns", "max_ns", "median_ns"})
    put_column(out, col([&](const json& s) { return zigzag(whole(s.at(key), key)); }));
}

// The stored payload: zstd at its default level, unless that would not shrink it.
std::string compress(const std::string& raw, bool* compressed) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), kZstdLevel);
  *compressed = !ZSTD_isError(n) && n < raw.size();
  if (!*compressed) return raw;
  out.resize(n);
  return out;
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write '{}' ({})", path, std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace frames
}  // namespace

using nlohmann::json;

std::string encode_gpu_block(const json& records, const json& kernels) {
  std::string out;
  frames::put_records(out, records);
  frames::put_kernels(out, kernels);
  return out;
}

std::string encode_frame(std::string_view header_json, std::string_view window_json, std::string_view gpu_block) {
  std::string raw;
  raw.reserve(12 + header_json.size() + window_json.size() + gpu_block.size());
  for (std::string_view part : {header_json, window_json, gpu_block}) {
    frames::put_u32(raw, static_cast<uint32_t>(part.size()));
    raw.append(part);
  }
  bool compressed = false;
  const std::string stored = frames::compress(raw, &compressed);
  std::string frame(frames::kMagic, sizeof frames::kMagic);
  frame.push_back(static_cast<char>(compressed ? 1 : 0));
  frame.append(3, '\0');
  frames::put_u32(frame, static_cast<uint32_t>(stored.size()));
  frames::put_u32(frame, static_cast<uint32_t>(raw.size()));
  frames::put_u32(frame, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(stored.data()),
                                             static_cast<uInt>(stored.size()))));
  frame += stored;
  return frame;
}

FrameSegmentWriter::FrameSegmentWriter(std::string run_dir, int rank, long pid, uint64_t segment_bytes)
    : run_dir_(std::move(run_dir)), rank_(rank), pid_(pid), segment_bytes_(segment_bytes) {}

FrameSegmentWriter::~FrameSegmentWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void FrameSegmentWriter::start_segment() {
  ++segment_;
  const std::string name = fmt::format("rank{:05d}-{}-seg{:04d}.lgr", rank_, pid_, segment_);
  path_ = (std::filesystem::path(run_dir_) / name).string();
  tmp_path_ = (std::filesystem::path(run_dir_) / ("." + name + ".tmp")).string();
  ::unlink(tmp_path_.c_str());  // a stale one from an import that was killed
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write '{}' ({})", tmp_path_, std::strerror(errno)));
  written_ = 0;
}

void FrameSegmentWriter::end_segment() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 || ::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_path_.c_str());
    throw std::runtime_error(fmt::format("cannot write '{}' ({})", path_, std::strerror(errno)));
  }
  done_.push_back(path_);
}

void FrameSegmentWriter::append(json header, json window) {
  if (fd_ >= 0 && written_ >= segment_bytes_) end_segment();
  if (fd_ < 0) start_segment();
  header["schema_version"] = 5;
  header["segment"] = segment_;
  std::string block;
  if (auto g = window.find("gpu"); g != window.end() && g->is_object()) {
    const json records = g->value("records", json::object());
    block = encode_gpu_block(records, g->value("kernels", json::array()));
    if (records.contains("api")) (*g)["records_api"] = records.at("api");  // the block has no column for it
    g->erase("kernels");
    g->erase("records");
  }
  // Names from an nsys export are bytes, not always UTF-8: written as U+FFFD, as JSON segments do.
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  const std::string frame = encode_frame(dump(header), dump(window), block);
  frames::write_all(fd_, frame, tmp_path_);
  written_ += frame.size();
}

std::vector<std::string> FrameSegmentWriter::finish() {
  end_segment();
  return done_;
}

}  // namespace laggard::report
