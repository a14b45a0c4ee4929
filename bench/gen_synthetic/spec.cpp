#include "spec.h"

#include <charconv>
#include <sstream>

namespace laggard::gen {
namespace {

template <class T>
bool parse_number(const std::string& s, T* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

bool parse_steps(const std::string& s, Straggler* st) {
  size_t colon = s.find(':');
  if (colon == std::string::npos) return false;
  return parse_number(s.substr(0, colon), &st->first_step) && parse_number(s.substr(colon + 1), &st->last_step) &&
         st->first_step >= 0 && st->first_step < st->last_step;
}

// Applies one key=value; false when the key is unknown or the value bad.
bool apply(Straggler* st, const std::string& key, const std::string& value) {
  if (key == "rank") return parse_number(value, &st->rank) && st->rank >= 0;
  if (key == "section") { st->section = value; return !value.empty(); }
  if (key == "factor") return parse_number(value, &st->factor) && st->factor > 0;
  if (key == "delay_ms") {
    double ms = 0;
    if (!parse_number(value, &ms) || ms <= 0) return false;
    st->delay_ns = static_cast<int64_t>(ms * 1e6);
    return true;
  }
  if (key == "steps") return parse_steps(value, st);
  return false;
}

}  // namespace

std::optional<Straggler> parse_straggler(const std::string& text, std::string* error) {
  Straggler st;
  bool has_rank = false;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    size_t eq = part.find('=');
    std::string key = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    if (!apply(&st, key, value)) {
      *error = "bad straggler field '" + part + "' in '" + text +
               "' (expected rank=N, section=NAME, factor=X, delay_ms=X, steps=A:B)";
      return std::nullopt;
    }
    has_rank |= key == "rank";
  }
  if (!has_rank) {
    *error = "straggler '" + text + "' names no rank";
    return std::nullopt;
  }
  if (st.delay_ns == 0 && st.factor == 1.0) {
    *error = "straggler '" + text + "' changes nothing: give factor=X (not 1) or delay_ms=X";
    return std::nullopt;
  }
  return st;
}

std::string check_spec(const Spec& s) {
  if (s.ranks < 1 || s.kernels < 3 || s.steps < 1 || s.ranks_per_host < 1 || s.steps_per_window < 1)
    return "need ranks >= 1, kernels >= 3, steps >= 1, ranks per host >= 1, steps per window >= 1";
  if (s.jitter < 0 || s.jitter >= 0.5) return "jitter must be in [0, 0.5)";
  for (const Straggler& st : s.stragglers) {
    if (st.rank >= s.ranks) return "straggler rank " + std::to_string(st.rank) + " is not below --ranks";
    if (!st.section.empty() && st.section != "fwd" && st.section != "bwd" && st.section != "opt")
      return "straggler section '" + st.section + "': the synthetic sections are fwd, bwd and opt";
  }
  return "";
}

}  // namespace laggard::gen
