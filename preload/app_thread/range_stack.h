// Per-thread NVTX push/pop nesting. Single-threaded by construction (one per thread), fixed
// size so a push never allocates. Domains keep separate nesting: a pop of domain D closes the
// innermost open range of D even if another domain's range was pushed after it, and a range's
// parent is the innermost open range of its own domain (issue 25: laggard's automatic "torch"
// sections never nest under a user's "data_load" of the default domain, nor the reverse).
#pragma once

#include <cstdint>

#include "name_table.h"
#include "records.h"

namespace laggard {

class RangeStack {
 public:
  static constexpr int kMaxDepth = 128;

  // Returns the 0-based nesting level of the new range (NVTX's return value for push).
  // `epoch`: pause_state.h's value at the call; a range is recorded only when its push and
  // pop see the same even (capturing) value, so nesting stays balanced across pause/resume.
  int push(const NameEntry* name, const void* domain, int64_t now_ns, uint32_t epoch = 0);

  // Closes the innermost open range of `domain`. Returns its level, or -1 when none is open
  // (unbalanced pop, counted). *emit is set when a kept range was closed and *out filled.
  int pop(const void* domain, int64_t now_ns, uint32_t tid, RangeRecord* out, bool* emit, uint32_t epoch = 0);

  // Innermost open kept section on this thread (kNoName when none): what a launch belongs to.
  uint32_t innermost_kept() const;
  // ... of one domain: a new range's parent.
  uint32_t innermost_kept_of(const void* domain) const;

  // Copies the stored open ranges, outermost first, into out (at most max); returns how many.
  // Reads only this object: usable from a signal handler on the owning thread (hang reports).
  struct OpenRange {
    const NameEntry* name;
    int64_t start_ns;  // mono
  };
  int snapshot(OpenRange* out, int max) const;

  int depth() const { return depth_; }
  uint64_t overflowed() const { return overflowed_; }
  uint64_t unbalanced() const { return unbalanced_; }
  uint64_t filtered() const { return filtered_; }  // closed ranges LAGGARD_SECTIONS did not keep

 private:
  struct Open {
    const NameEntry* name;
    const void* domain;
    int64_t start_ns;
    uint32_t parent_id;  // innermost kept range of the same domain below this one at push time
    uint32_t epoch;      // pause_state.h's value at push time
  };
  Open open_[kMaxDepth];
  int depth_ = 0;     // logical depth, may exceed kMaxDepth
  uint64_t overflowed_ = 0;
  uint64_t unbalanced_ = 0;
  uint64_t filtered_ = 0;
};

}  // namespace laggard
