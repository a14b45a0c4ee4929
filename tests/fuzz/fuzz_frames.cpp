// libFuzzer target: schema v5 binary rank files (docs/schema.md, "Version 5: binary kernel
// records"; written by preload/files/frame_out.cpp, read by report/read/reader_frames.cpp) through the
// whole report (fuzz_report.h). Inputs are whole .lgr files as the library writes them.
//
// Each frame is CRC-32 checked and usually zstd-compressed, so a byte flipped at random almost
// always ends the file at a bad checksum and never reaches the payload parsers. The custom
// mutator below therefore works on the decompressed payload: it takes the file apart into
// frames, mutates one part of one frame (header JSON, window JSON or the GPU records block) with
// libFuzzer's own mutator (and its dictionary), or duplicates / drops / reorders frames, then
// writes the frames back, zstd-compressed or stored, with a correct length and checksum. One
// mutation in eight goes to the raw file bytes instead, so torn tails, bad checksums, bad sizes
// and unknown compressions stay covered. Crashing inputs are real .lgr files: `laggard report`
// on a directory holding one reproduces them.
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_report.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr char kMagic[4] = {'L', 'G', 'F', '5'};
constexpr size_t kHead = 20;  // magic, compression + 3 reserved, stored, raw, crc32

uint32_t le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void put_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

struct Frame {
  std::string parts[3];  // header JSON, window JSON, GPU records block
  bool compressed = true;
};

// The whole frames at the start of `file` (those that decompress into three parts); the bytes
// after them go to `rest`.
std::vector<Frame> take_apart(std::string_view file, std::string& rest) {
  std::vector<Frame> frames;
  size_t at = 0;
  while (file.size() - at >= kHead && std::memcmp(file.data() + at, kMagic, 4) == 0) {
    const char* h = file.data() + at;
    uint32_t stored = le32(h + 8), raw = le32(h + 12);
    if (stored > file.size() - at - kHead || raw > (64u << 20)) break;
    std::string_view body = file.substr(at + kHead, stored);
    std::string payload;
    Frame f;
    f.compressed = h[4] == 1;
    if (f.compressed) {
      payload.assign(raw, '\0');
      size_t n = ZSTD_decompress(payload.data(), payload.size(), body.data(), body.size());
      if (ZSTD_isError(n) || n != raw) break;
    } else {
      payload.assign(body);
    }
    std::string_view p = payload;
    bool whole = true;
    for (std::string& part : f.parts) {
      whole = p.size() >= 4 && le32(p.data()) <= p.size() - 4;
      if (!whole) break;
      uint32_t n = le32(p.data());
      part.assign(p.substr(4, n));
      p.remove_prefix(4 + n);
    }
    if (!whole) break;
    frames.push_back(std::move(f));
    at += kHead + stored;
  }
  rest.assign(file.substr(at));
  return frames;
}

// One frame as frame_out.cpp encodes it: the parts length-prefixed, then compressed or not,
// behind a head giving the sizes and the CRC-32 of the stored bytes.
std::string put_together(const Frame& f) {
  std::string raw;
  for (const std::string& part : f.parts) {
    put_le32(raw, static_cast<uint32_t>(part.size()));
    raw += part;
  }
  std::string stored = raw;
  bool compressed = false;
  if (f.compressed) {
    std::string z(ZSTD_compressBound(raw.size()), '\0');
    size_t n = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1);
    if (!ZSTD_isError(n)) {
      z.resize(n);
      stored = std::move(z);
      compressed = true;
    }
  }
  std::string out(kMagic, 4);
  out.push_back(compressed ? 1 : 0);
  out.append(3, '\0');
  put_le32(out, static_cast<uint32_t>(stored.size()));
  put_le32(out, static_cast<uint32_t>(raw.size()));
  put_le32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(stored.data()),
                                            static_cast<uInt>(stored.size()))));
  return out + stored;
}

void mutate_part(std::string& part) {
  size_t size = part.size();
  part.resize(size + 64 + size / 4);
  size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(part.data()), size, part.size());
  part.resize(n);
}

void mutate_frames(std::vector<Frame>& frames, std::string& rest, std::minstd_rand& rng) {
  size_t pick = rng() % frames.size();
  switch (rng() % 16) {
    case 0:  // a frame appended twice (a retried append)
      frames.insert(frames.begin() + static_cast<long>(pick), frames[pick]);
      break;
    case 1:  // a frame lost
      if (frames.size() > 1) frames.erase(frames.begin() + static_cast<long>(pick));
      break;
    case 2:  // frames out of order
      std::swap(frames[pick], frames[rng() % frames.size()]);
      break;
    case 3:  // stored instead of compressed, or back
      frames[pick].compressed = !frames[pick].compressed;
      break;
    case 4:  // the tail after the whole frames
      mutate_part(rest);
      break;
    default: {
      // Mostly the window's JSON and the GPU block: that is where the values are.
      static constexpr int kPart[8] = {0, 1, 1, 1, 2, 2, 2, 2};
      mutate_part(frames[pick].parts[kPart[rng() % 8]]);
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  std::string rest;
  std::vector<Frame> frames = take_apart({reinterpret_cast<const char*>(data), size}, rest);
  if (frames.empty() || rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  mutate_frames(frames, rest, rng);
  std::string file;
  for (const Frame& f : frames) file += put_together(f);
  file += rest;
  if (file.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, file.data(), file.size());
  return file.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  laggard::fuzz::report_rank_file(data, size, "fuzz/rank00000-1-seg0000.lgr");
  return 0;
}
