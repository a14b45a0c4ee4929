// NVTX timestamps from the CPU's own counter. A push+pop pair reads the clock twice, and
// clock_gettime costs about 20 ns a read even through the vDSO; the counter (rdtsc on x86-64,
// cntvct_el0 on aarch64) costs a few. Its ticks are mapped onto CLOCK_MONOTONIC nanoseconds by
// a line refitted at every window close, so the file's timestamps stay CLOCK_MONOTONIC ns
// (docs/schema.md, "Units") within a bounded error. Falls back to clock_gettime when the counter
// is not invariant (CPUID 0x80000007 EDX bit 8, "Invariant TSC": Intel SDM vol. 3, 18.17.1; AMD
// APM vol. 3, CPUID Fn8000_0007 EDX[8] TscInvariant), when a calibration finds its rate or the
// fit unstable, or when LAGGARD_CLOCK=monotonic.
//
// Threads: now_ns() from any thread (lock-free: a sequence-numbered read of three words, and
// clock_gettime for that one read when a refit is under way); everything else from one thread
// at a time (activation, then the flush thread).
#pragma once

#include <atomic>
#include <cstdint>

#include "clock.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace laggard {

enum class ClockChoice { automatic, tsc, monotonic };  // LAGGARD_CLOCK: auto | tsc | monotonic

// The CPU's free-running counter; 0 where there is none (the clock then stays on clock_gettime).
// rdtsc is not serializing: a read may move a few dozen cycles against its neighbours, far below
// what a range measures.
inline uint64_t read_counter() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

// Whether the counter runs at a constant rate in every P-, C- and T-state (x86-64: CPUID's
// invariant TSC bit; aarch64: the generic timer always does).
bool counter_is_invariant();

class TscClock {
 public:
  // A fit needs this long between two points (the bracket of a point is ~100 ns: 4 ppm).
  static constexpr int64_t kMinIntervalNs = 50'000'000;
  // The first fit is made this long after the first point, not at the first window close.
  static constexpr int64_t kFirstFitNs = 100'000'000;
  // NTP slews CLOCK_MONOTONIC by at most 500 ppm; a larger change between two intervals is the
  // counter's own (frequency scaling, a migrated VM).
  static constexpr double kMaxRateChange = 1e-3;
  // The fit against clock_gettime at a calibration; beyond it the counter is not trusted.
  static constexpr int64_t kMaxErrorNs = 1'000'000;
  // A point whose bracket (clock_gettime, counter, clock_gettime) is wider was preempted.
  static constexpr int64_t kMaxBracketNs = 20'000;
  // A provisional line (below) is taken only when its two points' brackets bound its rate to
  // this: at most 50 us off when the first fit replaces it kFirstFitNs later.
  static constexpr double kProvisionalPpm = 500;
  // How long activation may wait for a provisional line's second point (issue 29).
  static constexpr int64_t kProvisionalWaitNs = 1'000'000;

  struct Point {
    uint64_t ticks = 0;
    int64_t mono_ns = 0;
    int64_t bracket_ns = 0;  // uncertainty of the pairing
  };

  constexpr TscClock() = default;

  // Any thread. CLOCK_MONOTONIC ns.
  __attribute__((always_inline)) int64_t now_ns() const noexcept {
    // Acquire: a thread that sees the clock on sees the line published before it was switched on.
    if (__builtin_expect(active_.load(std::memory_order_acquire), 1)) {
      const uint32_t seq = seq_.load(std::memory_order_acquire);
      // Acquire loads (plain moves on x86-64): the re-check of seq_ cannot move above them
      // (publish() in tsc_clock.cpp).
      const uint64_t tick0 = tick0_.load(std::memory_order_acquire);
      const int64_t ns0 = ns0_.load(std::memory_order_acquire);
      const int64_t mult = mult_.load(std::memory_order_acquire);
      if (__builtin_expect(!(seq & 1) && seq_.load(std::memory_order_relaxed) == seq, 1))
        return ns0 + static_cast<int64_t>((static_cast<__int128>(static_cast<int64_t>(read_counter() - tick0)) * mult) >> 32);
    }
    return mono_ns();
  }

  // What a push keeps (issue 29): the raw counter while the line is on -- one counter read, no
  // line -- else CLOCK_MONOTONIC ns. The pop turns it into a duration with one multiply
  // (ticks_to_ns) and into a timestamp only when the occurrence is sampled (to_ns).
  struct Stamp {
    int64_t value;  // counter ticks when `ticks`, else CLOCK_MONOTONIC ns
    bool ticks;
  };
  __attribute__((always_inline)) Stamp stamp() const noexcept {
    if (__builtin_expect(active_.load(std::memory_order_acquire), 1))
      return Stamp{static_cast<int64_t>(read_counter()), true};
    return Stamp{mono_ns(), false};
  }

  // Nanoseconds in `ticks` counter ticks (the difference of two stamps taken while the line was
  // on) at the current line's rate. One multiply, no sequence check: mult_ alone is always a rate
  // some line had. A refit between the two stamps changes only the rate applied (by at most
  // kMaxRateChange, 1e-3, else the counter is switched off; in practice a few ppm): the counter's
  // own elapsed ticks carry no step, where converting both ends through their own lines added
  // the refit's catch-up step (up to kMaxErrorNs) to a range open across it. Never negative.
  __attribute__((always_inline)) int64_t ticks_to_ns(int64_t ticks) const noexcept {
    const int64_t mult = mult_.load(std::memory_order_relaxed);
    return ticks > 0 ? static_cast<int64_t>((static_cast<__int128>(ticks) * mult) >> 32) : 0;
  }

  // CLOCK_MONOTONIC ns of a counter value taken while a line was on, through the current line
  // (async-signal-safe: hang reports convert open ranges with it). During a refit (rare, and
  // never waited for): now minus the ticks since, at the current rate.
  int64_t to_ns(int64_t ticks) const noexcept {
    const uint32_t seq = seq_.load(std::memory_order_acquire);
    const uint64_t tick0 = tick0_.load(std::memory_order_acquire);
    const int64_t ns0 = ns0_.load(std::memory_order_acquire);
    const int64_t mult = mult_.load(std::memory_order_acquire);
    if (__builtin_expect(!(seq & 1) && seq_.load(std::memory_order_relaxed) == seq, 1))
      return ns0 + static_cast<int64_t>(
                       (static_cast<__int128>(static_cast<int64_t>(static_cast<uint64_t>(ticks) - tick0)) * mult) >> 32);
    const int64_t d = static_cast<int64_t>(read_counter() - static_cast<uint64_t>(ticks));
    return mono_ns() - (d > 0 ? static_cast<int64_t>((static_cast<__int128>(d) * mult) >> 32) : 0);
  }
  int64_t stamp_ns(Stamp s) const noexcept { return s.ticks ? to_ns(s.value) : s.value; }

  // Decides whether the counter may be used (before the first calibrate). Returns the state.
  const char* configure(ClockChoice choice, bool invariant);

  // The tightest of a few bracketed (counter, CLOCK_MONOTONIC) pairs.
  static Point measure();

  // Feeds one point: the first is kept, later ones (kMinIntervalNs or more apart) refit the
  // line, or switch the counter off for good when its rate or the fit went astray. Returns a
  // line worth logging when the state changed, else nullptr.
  const char* calibrate(const Point& p);

  // At activation, after the first point: a provisional line through the first point and `p`,
  // so that ranges read the counter from the first one instead of clock_gettime until the first
  // fit (issue 29: a burst of ranges in the first 100 ms cost twice as much). Taken only when the
  // brackets bound the rate to kProvisionalPpm; the first fit replaces it as a refit does (never
  // going back, never compared for a rate change). Returns the new state, or nullptr when not
  // taken (provisional_wanted() says whether a later, farther point may still do).
  const char* provisional(const Point& p);
  bool provisional_wanted() const { return allowed_ && !fitted_ && have_last_; }

  // Not fitted yet (or only provisionally) and the first point is kFirstFitNs old: calibrate now
  // rather than at the first window close.
  bool first_fit_due(int64_t mono_now) const {
    return allowed_ && (!fitted_ || provisional_) && have_last_ && mono_now - last_.mono_ns >= kFirstFitNs;
  }

  bool active() const { return active_.load(std::memory_order_relaxed); }
  // "tsc", "monotonic (forced)", "monotonic: <why>", ...
  const char* state() const { return state_; }
  // The fit minus CLOCK_MONOTONIC at the latest calibration (0 before a second one).
  int64_t last_error_ns() const { return last_error_ns_; }
  // Lines published so far.
  uint64_t fits() const { return fits_; }

 private:
  int64_t fit_at(uint64_t ticks) const {
    return ns0_.load(std::memory_order_relaxed) +
           static_cast<int64_t>((static_cast<__int128>(static_cast<int64_t>(ticks - tick0_.load(std::memory_order_relaxed))) *
                                 mult_.load(std::memory_order_relaxed)) >> 32);
  }
  void publish(uint64_t tick0, int64_t ns0, double ns_per_tick);
  const char* give_up(const char* fmt, double value);

  // Read by every thread.
  std::atomic<bool> active_{false};
  std::atomic<uint32_t> seq_{0};      // odd while a refit writes the three words below
  std::atomic<uint64_t> tick0_{0};    // the line: ns = ns0 + (ticks - tick0) * mult / 2^32
  std::atomic<int64_t> ns0_{0};
  std::atomic<int64_t> mult_{0};
  // The calibrating thread's.
  bool allowed_ = false, fitted_ = false, have_last_ = false;
  bool provisional_ = false;  // the line published is provisional(): the first fit is still to come
  Point last_{};
  double last_rate_ = 0;  // ns per tick over the previous interval (0: none yet)
  int64_t last_error_ns_ = 0;
  uint64_t fits_ = 0;
  const char* state_ = "monotonic (not configured)";
  char why_[160]{};       // state_ when it names numbers
};

// The clock of NVTX ranges in this process.
extern constinit TscClock g_range_clock;

}  // namespace laggard
