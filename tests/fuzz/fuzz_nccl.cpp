// libFuzzer target: the NCCL profiler-plugin core (nccl_hooks/profiler.h) driven as NCCL's
// callbacks drive it, with whatever descriptors, handles and orders the input spells: fields
// of any value, strings of any bytes, stale, repeated or made-up handles and contexts, stops
// without starts. Then the flush thread's side: harvest, take the window, render it as the
// writer does. The plugin must neither crash nor write a window that is not valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_out.h"
#include "nccl_json.h"
#include "profiler.h"

namespace {

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  uint64_t word(int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v = v << 8 | byte();
    return v;
  }
  // A string of up to 255 bytes (NUL-terminated when used as a C string), or null.
  const char* str(std::vector<std::string>& keep) {
    uint8_t len = byte();
    if (len == 255) return nullptr;
    std::string s;
    for (uint8_t k = 0; k < len && !empty(); ++k) s += static_cast<char>(byte());
    keep.push_back(s);
    return keep.back().c_str();
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

void check(const std::string& rendered) {
  if (nlohmann::json::accept("{" + rendered.substr(1))) return;
  std::fprintf(stderr, "not JSON: %s\n", rendered.c_str());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace laggard::nccl;
  Input in(data, size);
  ProfilerOptions opt;
  opt.pool_slots = 64;
  opt.max_comms = 4;
  opt.max_ops_per_window = 32;
  Profiler p(opt, 1'700'000'000'000'000'000);
  std::vector<void*> contexts{nullptr}, handles{nullptr};
  std::vector<std::string> keep;
  keep.reserve(4096);  // c_str() pointers stay valid
  int64_t now = 0;
  while (!in.empty() && keep.size() < 4000) {
    auto pick = [&](std::vector<void*>& v) -> void* {
      uint8_t k = in.byte();
      if (k == 255) return reinterpret_cast<void*>(in.word(8));  // made up
      return v[k % v.size()];
    };
    switch (in.byte() % 9) {
      case 0: {
        uint64_t hash = in.word(8);
        const char* name = in.str(keep);
        int nnodes = static_cast<int>(in.word(4)), nranks = static_cast<int>(in.word(4)),
            rank = static_cast<int>(in.word(4));
        contexts.push_back(p.add_comm(hash, name, nnodes, nranks, rank));
        break;
      }
      case 1: p.finalize_comm(pick(contexts)); break;
      case 2: {
        CollInfo c;
        void* ctx = pick(contexts);
        c.seq = in.word(8);
        c.func = in.str(keep);
        c.count = in.word(8);
        c.root = static_cast<int>(in.word(4));
        c.datatype = in.str(keep);
        c.nchannels = in.byte();
        c.algo = in.str(keep);
        c.proto = in.str(keep);
        handles.push_back(p.start_coll(ctx, c));
        break;
      }
      case 3: {
        P2pInfo i;
        void* ctx = pick(contexts);
        i.func = in.str(keep);
        i.count = in.word(8);
        i.peer = static_cast<int>(in.word(4));
        i.datatype = in.str(keep);
        i.nchannels = in.byte();
        handles.push_back(p.start_p2p(ctx, i));
        break;
      }
      case 4: {
        void* parent = pick(handles);
        uint8_t channel = in.byte();
        handles.push_back(p.start_kernel_ch(parent, channel, in.word(8)));
        break;
      }
      case 5: {
        void* h = pick(handles);
        p.record_kernel_ch_stop(h, in.word(8));
        break;
      }
      case 6: p.stop(pick(handles)); break;
      case 7:
        now += static_cast<int64_t>(in.word(5));
        p.harvest(now, false);
        break;
      case 8: {
        laggard::NcclWindow w = p.take_window();
        std::string s;
        laggard::JsonOut j(s);
        j.begin_object();
        laggard::render_nccl(j, w, 1'700'000'000'000'000'000);
        j.end_object();
        check(s);
        break;
      }
    }
  }
  p.harvest(now + 1'000'000'000'000, true);
  laggard::NcclWindow w = p.take_window();
  std::string s;
  laggard::JsonOut j(s);
  j.begin_object();
  laggard::render_nccl(j, w, 1'700'000'000'000'000'000);
  j.end_object();
  check(s);
  return 0;
}
