#include "text_escape.h"

#include <fmt/format.h>

namespace laggard::report {

std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
             static_cast<unsigned char>(s[i + 1]) <= 0x9f)
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[++i]));
    else out += static_cast<char>(c);
  }
  return out;
}

RunModel escaped_for_text(RunModel m) {
  auto esc = [](std::string& s) { s = escape_text(s); };
  m.strings.transform([](const std::string& s) { return escape_text(s); });
  esc(m.dir);
  esc(m.run_id);
  for (std::string& r : m.other_runs) esc(r);
  for (Problem& p : m.problems) {
    esc(p.kind);
    esc(p.file);
    esc(p.message);
  }
  for (RankData& r : m.ranks) {
    esc(r.host);
    esc(r.run_id);
    esc(r.nvtx_status);
    esc(r.cupti_status);
    for (std::string& f : r.files) esc(f);
    Counts dropped;
    for (auto& [k, v] : r.dropped) dropped[escape_text(k)] += v;
    r.dropped = std::move(dropped);
    for (CaptureWindow& w : r.windows)
      for (SectionWindow& s : w.sections) {
        esc(s.name);
        esc(s.parent);
      }
  }
  return m;
}

}  // namespace laggard::report
