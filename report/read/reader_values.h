// Checked reads of the numbers in a rank file. Every value is held to bounds that keep the
// report's arithmetic from overflowing (times + offsets, sums of durations) and that no
// allocation can be sized from; a value outside them throws std::runtime_error naming the field,
// which the reader turns into a problem entry (docs/report.md, "Problems").
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace laggard::report::values {

// Times lie in [0, kMaxTimeNs] (epoch ns, year 2096), durations and offsets in
// [-kMaxDurNs, kMaxDurNs] (104 days): any two times plus two offsets still fit in int64.
constexpr int64_t kMaxTimeNs = 4'000'000'000'000'000'000;
constexpr int64_t kMaxDurNs = int64_t{1} << 53;
constexpr int kMaxWorldSize = 1 << 20;               // ranks (the CLI's --world-size bound too)
constexpr uint64_t kMaxCount = uint64_t{1} << 53;    // counts stay exact as doubles

// A whole number in [lo, hi]; integral floats (1e3) are accepted, anything else throws.
int64_t integer(const nlohmann::json& v, int64_t lo, int64_t hi, const char* what);
uint64_t count(const nlohmann::json& v, const char* what);   // [0, kMaxCount]
int64_t time_ns(const nlohmann::json& v, const char* what);  // [0, kMaxTimeNs]
int64_t dur_ns(const nlohmann::json& v, const char* what);   // [0, kMaxDurNs]
int64_t offset_ns(const nlohmann::json& v, const char* what);  // [-kMaxDurNs, kMaxDurNs]
double seconds(const nlohmann::json& v, double hi, const char* what);  // finite, [0, hi]
// object[key] as json::value(key, uint64_t{0}) reads a valid file: 0 when absent, an unsigned
// integer as it is; anything else (a float, a negative number: value() would convert it, the
// float with undefined behaviour -- found by fuzz_reader) throws.
uint64_t unsigned_or_zero(const nlohmann::json& object, const char* key, const char* what);

}  // namespace laggard::report::values
