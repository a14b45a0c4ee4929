#include "json_text.h"

#include <vector>

#include "parallel.h"

namespace laggard::report {
namespace {

// A member's dump(2) as it stands one level down: every line after the first indented by two
// more spaces (strings never hold a raw newline: dump escapes it).
std::string indented_one_level(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out.append("  ");
  }
  return out;
}

}  // namespace

void write_json_indented(const nlohmann::json& value, std::ostream& out) {
  if (!value.is_object() || value.empty()) {
    out << value.dump(2);
    return;
  }
  std::vector<const nlohmann::json*> members;
  std::vector<std::string> keys;
  for (const auto& [key, member] : value.items()) {
    keys.push_back(nlohmann::json(key).dump());
    members.push_back(&member);
  }
  std::vector<std::string> texts(members.size());
  parallel_for(members.size(), [&](size_t i) { texts[i] = indented_one_level(members[i]->dump(2)); });
  out << "{\n";
  for (size_t i = 0; i < texts.size(); ++i) out << "  " << keys[i] << ": " << texts[i] << (i + 1 < texts.size() ? ",\n" : "\n");
  out << '}';
}

}  // namespace laggard::report
