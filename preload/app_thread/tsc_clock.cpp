#include "tsc_clock.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace laggard {

constinit TscClock g_range_clock;

bool counter_is_invariant() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &a, &b, &c, &d)) return false;
  return (d >> 8) & 1u;
#elif defined(__aarch64__)
  return true;  // Arm ARM D11.1: the system counter's frequency is fixed
#else
  return false;
#endif
}

const char* TscClock::configure(ClockChoice choice, bool invariant) {
  active_.store(false, std::memory_order_relaxed);
  fitted_ = have_last_ = provisional_ = false;
  last_rate_ = 0;
  last_error_ns_ = 0;
  if (read_counter() == 0) {
    allowed_ = false;
    state_ = "monotonic: no CPU counter on this architecture";
  } else if (choice == ClockChoice::monotonic) {
    allowed_ = false;
    state_ = "monotonic (LAGGARD_CLOCK=monotonic)";
  } else if (choice == ClockChoice::automatic && !invariant) {
    allowed_ = false;
    state_ = "monotonic: the CPU's time-stamp counter is not invariant";
  } else {
    allowed_ = true;
    state_ = choice == ClockChoice::tsc && !invariant ? "tsc (LAGGARD_CLOCK=tsc; counter not invariant), calibrating"
                                                      : "tsc, calibrating";
  }
  return state_;
}

TscClock::Point TscClock::measure() {
  Point best{0, 0, INT64_MAX};
  for (int i = 0; i < 5; ++i) {
    int64_t a = mono_ns();
    uint64_t t = read_counter();
    int64_t b = mono_ns();
    if (b - a < best.bracket_ns) best = Point{t, a + (b - a) / 2, b - a};
  }
  return best;
}

void TscClock::publish(uint64_t tick0, int64_t ns0, double ns_per_tick) {
  const uint32_t s = seq_.load(std::memory_order_relaxed);
  seq_.store(s + 1, std::memory_order_relaxed);
  // A seqlock without fences (as cupti/correlation_table.cpp): release stores of the fields, so a
  // reader that acquires a new value also sees the odd sequence number. ThreadSanitizer models
  // these; it does not model atomic_thread_fence.
  tick0_.store(tick0, std::memory_order_release);
  ns0_.store(ns0, std::memory_order_release);
  mult_.store(static_cast<int64_t>(std::llround(ns_per_tick * 4294967296.0)), std::memory_order_release);
  seq_.store(s + 2, std::memory_order_release);
}

const char* TscClock::give_up(const char* fmt, double value) {
  active_.store(false, std::memory_order_relaxed);
  allowed_ = false;
  std::snprintf(why_, sizeof why_, fmt, value);
  state_ = why_;
  return state_;
}

const char* TscClock::calibrate(const Point& p) {
  if (!allowed_ || p.bracket_ns > kMaxBracketNs) return nullptr;
  if (!have_last_) {
    last_ = p;
    have_last_ = true;
    return nullptr;
  }
  const int64_t dm = p.mono_ns - last_.mono_ns;
  if (dm < kMinIntervalNs) return nullptr;  // too short to tell; the next point spans more
  const int64_t dt = static_cast<int64_t>(p.ticks - last_.ticks);
  if (dt <= 0) return give_up("monotonic: the CPU's counter did not advance over %.0f ms", double(dm) / 1e6);
  const double rate = double(dm) / double(dt);
  if (last_rate_ > 0 && std::fabs(rate / last_rate_ - 1.0) > kMaxRateChange)
    return give_up("monotonic: the CPU's counter changed rate by %.0f ppm between two windows",
                   std::fabs(rate / last_rate_ - 1.0) * 1e6);
  int64_t ns0 = p.mono_ns;
  if (fitted_) {
    last_error_ns_ = fit_at(p.ticks) - p.mono_ns;
    if (std::llabs(last_error_ns_) > kMaxErrorNs)
      return give_up("monotonic: the counter's fit was %.0f us off CLOCK_MONOTONIC", double(last_error_ns_) / 1e3);
    // Never backwards from the current line (a range open across the refit keeps a
    // non-negative duration); a line ahead of CLOCK_MONOTONIC is slowed to meet it at the next
    // calibration instead.
    if (last_error_ns_ > 0) ns0 += last_error_ns_;
  }
  publish(p.ticks, ns0, double(p.mono_ns + dm - ns0) / double(dt));
  const bool first = !fitted_ || provisional_;
  fitted_ = true;
  provisional_ = false;
  ++fits_;
  last_ = p;
  last_rate_ = rate;
  active_.store(true, std::memory_order_release);
  if (!first) return nullptr;
  std::snprintf(why_, sizeof why_, "tsc (%.4f GHz counter)", 1.0 / rate);
  state_ = why_;
  return state_;
}

const char* TscClock::provisional(const Point& p) {
  if (!provisional_wanted() || p.bracket_ns > kMaxBracketNs) return nullptr;
  const int64_t dm = p.mono_ns - last_.mono_ns;
  const int64_t dt = static_cast<int64_t>(p.ticks - last_.ticks);
  if (dm <= 0 || dt <= 0) return nullptr;
  // Each point is known to within its bracket: the rate, to within both over the interval.
  if (double(last_.bracket_ns + p.bracket_ns) * 1e6 > kProvisionalPpm * double(dm)) return nullptr;
  publish(p.ticks, p.mono_ns, double(dm) / double(dt));
  fitted_ = provisional_ = true;  // the first fit keeps continuity with it, as a refit does
  active_.store(true, std::memory_order_release);
  std::snprintf(why_, sizeof why_, "tsc (provisional, %.4f GHz from two points %.0f us apart), calibrating",
                double(dt) / double(dm), double(dm) / 1e3);
  state_ = why_;
  return state_;
}

}  // namespace laggard
