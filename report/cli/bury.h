// Skipping the frees at exit, as clang does (-disable-free, llvm::BuryPointer): the run model, the
// analyses and the JSON report's DOM of a large merge are millions of blocks that took 0.1 s (10,000
// ranks of summaries) to seconds (960 ranks of kernels) to free just before the process exits and the
// kernel takes its memory back whole.
#pragma once

#include <type_traits>
#include <utility>

namespace laggard::cli {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LAGGARD_FREES_AT_EXIT 1  // sanitizer builds free everything: their leak check must stay exact
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LAGGARD_FREES_AT_EXIT 1
#endif
#endif

// Moves `value` where it is never destroyed; only for what lives until the command returns to main.
template <class T>
void bury(T&& value) {
#ifdef LAGGARD_FREES_AT_EXIT
  std::decay_t<T> dropped(std::forward<T>(value));  // freed here, as before
#else
  new std::decay_t<T>(std::forward<T>(value));
#endif
}

}  // namespace laggard::cli
