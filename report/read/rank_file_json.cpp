#include "rank_file_json.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "reader_frames.h"

namespace laggard::report {
namespace {

using ojson = nlohmann::ordered_json;

constexpr uint32_t kNoString = 0xffffffffu;  // a kernel statistic without a name, as JSON prints it

uint32_t le32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Reads the GPU block's columns (docs/schema.md, "Version 5: binary kernel records") front to
// back as stored; throws when the block is shorter than it says.
class Columns {
 public:
  explicit Columns(std::string_view b) : b_(b) {}
  uint32_t u32() {
    need(4);
    at_ += 4;
    return le32(b_, at_ - 4);
  }
  std::vector<uint64_t> column(size_t n) {
    need(1);
    unsigned width = static_cast<unsigned char>(b_[at_++]);
    if (width != 1 && width != 2 && width != 4 && width != 8) throw std::runtime_error("GPU block: bad column width");
    if (n > (b_.size() - at_) / width) throw std::runtime_error("GPU block: column cut off");
    std::vector<uint64_t> values(n);
    for (uint64_t& v : values) {
      for (unsigned i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(b_[at_ + i]);
      at_ += width;
    }
    return values;
  }
  size_t left() const { return b_.size() - at_; }

 private:
  void need(size_t n) const {
    if (b_.size() - at_ < n) throw std::runtime_error("GPU block cut off");
  }
  std::string_view b_;
  size_t at_ = 0;
};

// Index + 1 (0: none) back to the JSON form's index, -1 for none.
int64_t minus_one(uint64_t v) { return static_cast<int64_t>(v) - 1; }

ojson records_json(Columns& in, int64_t window_start) {
  uint32_t n = in.u32(), m = in.u32();
  if (m > in.left() / 24) throw std::runtime_error("GPU block: shapes cut off");
  ojson shapes = ojson::array();
  for (uint32_t s = 0; s < m; ++s) {
    ojson shape = ojson::array();
    for (int d = 0; d < 6; ++d) shape.push_back(in.u32());
    shapes.push_back(shape);
  }
  if (n > in.left() / 15) throw std::runtime_error("GPU block: more records than it holds");
  auto kind = in.column(n), flags = in.column(n), copy_kind = in.column(n), name = in.column(n),
       section = in.column(n), start = in.column(n), dur = in.column(n), api_start = in.column(n),
       api_dur = in.column(n), tid = in.column(n), correlation = in.column(n), device = in.column(n),
       stream = in.column(n), shape = in.column(n), bytes = in.column(n);
  ojson r = ojson::object();
  for (const char* key : {"kind", "name", "section", "start_offset_ns", "dur_ns", "api_start_offset_ns", "api_dur_ns",
                          "tid", "correlation", "device", "stream", "shape", "bytes", "copy_kind", "flags"})
    r[key] = ojson::array();
  int64_t at = window_start;
  uint32_t corr = 0;
  for (size_t i = 0; i < n; ++i) {
    at += unzigzag(start[i]);
    corr += static_cast<uint32_t>(unzigzag(correlation[i]));
    bool api_known = api_dur[i] > 0;
    r["kind"].push_back(kind[i]);
    r["name"].push_back(minus_one(name[i]));
    r["section"].push_back(minus_one(section[i]));
    r["start_offset_ns"].push_back(at - window_start);
    r["dur_ns"].push_back(unzigzag(dur[i]));
    r["api_start_offset_ns"].push_back(api_known ? at + unzigzag(api_start[i]) - window_start : 0);
    r["api_dur_ns"].push_back(minus_one(api_dur[i]));
    r["tid"].push_back(tid[i]);
    r["correlation"].push_back(corr);
    r["device"].push_back(minus_one(device[i]));
    r["stream"].push_back(stream[i]);
    r["shape"].push_back(minus_one(shape[i]));
    r["bytes"].push_back(bytes[i]);
    r["copy_kind"].push_back(copy_kind[i]);
    r["flags"].push_back(flags[i]);
  }
  r["shapes"] = std::move(shapes);
  return r;
}

const char* kind_name(uint64_t k) { return k == 1 ? "memcpy" : k == 2 ? "memset" : "kernel"; }

ojson kernels_json(Columns& in) {
  uint32_t k = in.u32();
  if (k > in.left() / 16) throw std::runtime_error("GPU block: more kernel statistics than it holds");
  auto section = in.column(k), name = in.column(k), kind = in.column(k), flags = in.column(k);
  std::vector<uint64_t> grid[3] = {in.column(k), in.column(k), in.column(k)};
  std::vector<uint64_t> block[3] = {in.column(k), in.column(k), in.column(k)};
  auto count = in.column(k), total = in.column(k), min = in.column(k), max = in.column(k), median = in.column(k);
  ojson out = ojson::array();
  for (size_t i = 0; i < k; ++i) {
    ojson s = ojson::object();
    s["section"] = section[i] ? ojson(section[i] - 1) : ojson(nullptr);
    s["name"] = name[i] ? name[i] - 1 : uint64_t{kNoString};
    s["kind"] = kind_name(kind[i]);
    s["nccl"] = (flags[i] & 1u) != 0;
    s["graph"] = (flags[i] & 2u) != 0;
    s["grid"] = {grid[0][i], grid[1][i], grid[2][i]};
    s["block"] = {block[0][i], block[1][i], block[2][i]};
    s["count"] = count[i];
    s["total_ns"] = unzigzag(total[i]);
    s["min_ns"] = unzigzag(min[i]);
    s["max_ns"] = unzigzag(max[i]);
    s["median_ns"] = unzigzag(median[i]);
    out.push_back(std::move(s));
  }
  return out;
}

// The frame window's `gpu` with `kernels` after `strings` and `records` last, where the JSON
// writer puts them (preload/files/gpu_json.cpp).
ojson gpu_json(const ojson& gpu, std::string_view block, int64_t window_start) {
  Columns in(block);
  ojson records = records_json(in, window_start);
  ojson kernels = kernels_json(in);
  if (in.left()) throw std::runtime_error("GPU block: bytes left over");
  ojson out = ojson::object();
  for (const auto& [key, value] : gpu.items()) {
    if (key == "records_api") {  // imported traces: back where a JSON segment has it
      records["api"] = value;
      continue;
    }
    out[key] = value;
    if (key == "strings") out["kernels"] = kernels;
  }
  if (records.contains("api")) {  // before "shapes", as the JSON writer of imports puts it
    ojson shapes = std::move(records["shapes"]);
    records.erase("shapes");
    records["shapes"] = std::move(shapes);
  }
  out["records"] = std::move(records);
  return out;
}

ojson window_json(const FrameParts& f) {
  ojson w = ojson::parse(f.window_json);
  if (w.contains("gpu") && !f.gpu_records.empty())
    w["gpu"] = gpu_json(w["gpu"], f.gpu_records, w.at("start_ns").get<int64_t>());
  return w;
}

RankFileJson frames_json(std::string_view text) {
  RankFileJson out;
  ojson header, windows = ojson::array();
  std::string bad_frame;
  FrameScan scan = scan_frames(text, [&](const FrameParts& f) {
    if (!bad_frame.empty()) return;
    try {
      ojson w = window_json(f);
      header = ojson::parse(f.header_json);
      windows.push_back(std::move(w));
    } catch (const std::exception& e) {
      bad_frame = "frame " + std::to_string(windows.size()) + " checks out but does not decode (" + e.what() +
                  "); the " + std::to_string(windows.size()) + " whole window(s) before it are shown";
    }
  });
  out.problem = !bad_frame.empty() ? bad_frame : scan.torn_tail;
  if (header.is_object()) {
    out.doc = std::move(header);
    out.doc["windows"] = std::move(windows);
  } else if (out.problem.empty()) {
    out.problem = "no whole frame";
  }
  return out;
}

}  // namespace

RankFileJson rank_file_json(std::string_view text) {
  if (is_frame_file(text)) return frames_json(text);
  RankFileJson out;
  if (text.empty()) {
    out.problem = "empty file: not a rank file";
    return out;
  }
  try {
    out.doc = ojson::parse(text);
  } catch (const std::exception& e) {
    out.doc = nullptr;
    std::string why = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ...": the part after "] "
    if (size_t at = why.find("] "); why.rfind("[json.exception.", 0) == 0 && at != std::string::npos) why.erase(0, at + 2);
    out.problem = "not a rank file (neither JSON nor binary frames): " + why;
  }
  return out;
}

}  // namespace laggard::report
