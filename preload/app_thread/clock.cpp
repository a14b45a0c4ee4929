#include "clock.h"

namespace laggard {

int64_t measure_epoch_offset_ns() {
  int64_t best_width = INT64_MAX, best = 0;
  for (int i = 0; i < 7; ++i) {
    int64_t a = mono_ns();
    int64_t r = realtime_ns();
    int64_t b = mono_ns();
    if (b - a < best_width) {
      best_width = b - a;
      best = r - (a + (b - a) / 2);
    }
  }
  return best;
}

}  // namespace laggard
