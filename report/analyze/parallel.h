// Runs independent per-rank work on every core. Each index writes only its own results, so the
// outcome does not depend on the number of threads or their timing (the reports stay identical).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <future>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

namespace laggard::report {

// Threads the analyses use: the machine's cores (at least 1, at most 64).
inline unsigned analysis_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return std::clamp(n, 1u, 64u);
}

namespace detail {
// job(ctx) on `helpers` threads kept for the purpose and on the caller, returning when all are done;
// false, having run nothing, when those threads are in use (a parallel_for inside another's f, or
// beside another on a thread of run_beside) or none could be started (parallel.cpp).
bool run_on_pool(void (*job)(void*), void* ctx, size_t helpers);
}  // namespace detail

// f(i) for every i in [0, n), spread over the cores; the first exception is rethrown here.
template <class F>
void parallel_for(size_t n, F&& f) {
  const size_t threads = std::min<size_t>(analysis_threads(), n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) f(i);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  if (detail::run_on_pool([](void* w) { (*static_cast<decltype(work)*>(w))(); }, &work, threads - 1)) {
    if (error) std::rethrow_exception(error);
    return;
  }
  std::vector<std::thread> pool;  // threads of this call's own
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// f() on a thread of its own, beside the caller's work. Where no thread can be started, f runs
// when its result is asked for (get()). A future from a thread waits for it when destroyed, so
// an exception in the caller's work cannot leave f running on freed state.
template <class F>
std::future<std::invoke_result_t<F&>> run_beside(F f) {
  try {
    return std::async(std::launch::async, f);
  } catch (const std::system_error&) {
    return std::async(std::launch::deferred, std::move(f));
  }
}

}  // namespace laggard::report
