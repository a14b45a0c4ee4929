// What laggard saw at each CUDA launch call, found again by CUPTI correlation id when the GPU
// record arrives (milliseconds to seconds later, on another thread). A fixed table indexed by
// the id: the launching thread writes without locks or allocation, the thread that parses
// buffers reads. A slot is overwritten when ids wrap around the table; a record whose slot no
// longer holds its id is "unmatched" (counted), never attributed to the wrong launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace laggard::cupti {

struct LaunchInfo {
  uint32_t section;      // innermost open NVTX section of the launching thread (kNoName: none)
  uint32_t tid;          // launching thread
  int64_t api_start_ns;  // CLOCK_MONOTONIC
  int64_t api_end_ns;    // 0 while the call has not returned
};

class CorrelationTable {
 public:
  explicit CorrelationTable(size_t slots_pow2 = 1u << 17);

  // API entry. A second entry with the same id (a runtime call and the driver call inside it)
  // keeps the first one's start. True for the first entry of an id: one launch, counted once.
  bool enter(uint32_t correlation, uint32_t section, uint32_t tid, int64_t now_ns);
  // API exit: the latest exit with this id sets the end.
  void exit(uint32_t correlation, int64_t now_ns);
  // False when the id was never entered or its slot was reused since.
  bool find(uint32_t correlation, LaunchInfo* out) const;

  size_t slots() const { return mask_ + 1; }

 private:
  static constexpr uint32_t kEmpty = 0, kBusy = 0xffffffffu;
  struct Slot {
    std::atomic<uint32_t> id{kEmpty};
    std::atomic<uint32_t> section{0};
    std::atomic<uint32_t> tid{0};
    std::atomic<int64_t> start_ns{0};
    std::atomic<int64_t> end_ns{0};
  };
  std::unique_ptr<Slot[]> slots_;
  size_t mask_;
};

}  // namespace laggard::cupti
