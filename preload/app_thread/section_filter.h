// LAGGARD_SECTIONS: which NVTX names become sections. Matched once per distinct name (when the
// name is interned), never per range, with RE2: linear time whatever the pattern, so no pattern
// can hang the application inside nvtxRangePush (std::regex backtracks: '(x+x+)+y' never ends).
// RE2 lives in liblaggard-re2.so next to liblaggard.so, loaded only when a filter is set.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace laggard {

class SectionFilter {
 public:
  // Compiles `pattern` (RE2 syntax, searched anywhere in the name). Returns null and sets
  // *error when the pattern is invalid or RE2 cannot be loaded.
  static std::unique_ptr<SectionFilter> compile(const std::string& pattern, std::string* error);
  ~SectionFilter();
  SectionFilter(const SectionFilter&) = delete;
  SectionFilter& operator=(const SectionFilter&) = delete;

  bool matches(std::string_view name) const;

  struct Api;  // liblaggard-re2.so's entry points

 private:
  SectionFilter(const Api* api, void* re) : api_(api), re_(re) {}
  const Api* api_;
  void* re_;
};

// Where liblaggard-re2.so is looked for: next to the library (or program) holding this code.
std::string re2_shim_path();

}  // namespace laggard
