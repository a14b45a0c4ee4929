#include "reader_pause.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "reader_values.h"

namespace laggard::report {

void read_paused_window(const nlohmann::json& paused, CaptureWindow& cw) {
  if (!paused.is_array()) throw std::runtime_error("paused is not an array");
  for (const auto& p : paused) {
    if (!p.is_object()) throw std::runtime_error("a paused span is not an object");
    PausedPeriod s;
    s.start_ns = values::time_ns(p.at("start_ns"), "paused start_ns");
    s.end_ns = values::time_ns(p.at("end_ns"), "paused end_ns");
    if (s.end_ns < s.start_ns) throw std::runtime_error("a paused span ends before it starts");
    const auto& cmd = p.at("command");
    if (!cmd.is_string() || (cmd != "pause" && cmd != "window"))
      throw std::runtime_error("a paused span's command is not \"pause\" or \"window\"");
    s.command = cmd.get<std::string>();
    s.seq = values::count(p.at("seq"), "paused seq");
    if (auto it = p.find("ongoing"); it != p.end()) {
      if (!it->is_boolean()) throw std::runtime_error("paused ongoing is not true or false");
      s.ongoing = it->get<bool>();
    }
    // Clipped: a span never claims time outside its window.
    s.start_ns = std::clamp(s.start_ns, cw.start_ns, cw.end_ns);
    s.end_ns = std::clamp(s.end_ns, cw.start_ns, cw.end_ns);
    cw.paused.push_back(std::move(s));
  }
  std::sort(cw.paused.begin(), cw.paused.end(),
            [](const PausedPeriod& a, const PausedPeriod& b) { return a.start_ns < b.start_ns; });
}

void join_paused_periods(RankData& rank) {
  rank.paused.clear();
  const CaptureWindow* prev_window = nullptr;
  for (const CaptureWindow& w : rank.windows) {
    for (const PausedPeriod& s : w.paused) {
      PausedPeriod* last = rank.paused.empty() ? nullptr : &rank.paused.back();
      bool continues = last && prev_window && last->ongoing && last->end_ns == prev_window->end_ns &&
                       s.start_ns == w.start_ns && last->seq == s.seq && last->command == s.command;
      if (continues) {
        last->end_ns = s.end_ns;
        last->ongoing = s.ongoing;
      } else {
        rank.paused.push_back(s);
      }
    }
    prev_window = &w;
  }
}

}  // namespace laggard::report
