// liblaggard-re2.so: LAGGARD_SECTIONS through RE2 (linear time in the name's length, whatever the
// pattern). A separate library so liblaggard.so itself needs nothing beyond libc at load time:
// section_filter.cpp loads this one only when a filter is set. C entry points only.
#include <re2/re2.h>

#include <cstring>
#include <string>

extern "C" {

__attribute__((visibility("default"))) void* laggard_re2_compile(const char* pattern, char* error,
                                                                 size_t error_cap) {
  try {
    RE2::Options opts;
    opts.set_log_errors(false);
    auto* re = new RE2(pattern, opts);
    if (re->ok()) return re;
    if (error && error_cap) {
      std::strncpy(error, re->error().c_str(), error_cap - 1);
      error[error_cap - 1] = '\0';
    }
    delete re;
  } catch (...) {
    if (error && error_cap) std::strncpy(error, "out of memory", error_cap - 1);
  }
  return nullptr;
}

__attribute__((visibility("default"))) int laggard_re2_search(const void* re, const char* text, size_t n) {
  try {
    return RE2::PartialMatch(re2::StringPiece(text, n), *static_cast<const RE2*>(re)) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

__attribute__((visibility("default"))) void laggard_re2_free(void* re) { delete static_cast<RE2*>(re); }
}
