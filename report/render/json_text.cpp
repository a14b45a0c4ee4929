#include "json_text.h"

#include <algorithm>
#include <vector>

#include "parallel.h"

namespace laggard::report {
namespace {

using nlohmann::json;

// Containers this close to the root are written piece by piece; deeper values are dumped whole,
// each on whichever core is free (at 10,000 ranks the report's big arrays sit two levels down).
constexpr int kSplitLevels = 3;

// The report's text in order: literal glue, or a value to dump at an indentation level.
struct Piece {
  std::string text;
  const json* value = nullptr;
  int level = 0;
};

// The layout of dump(2): "[\n", each element on its own line two spaces further in, ",\n"
// between them, then "\n" and the closing bracket at the container's own indentation.
void plan(const json& v, int level, std::vector<Piece>& out) {
  if (!v.is_structured() || v.empty() || level >= kSplitLevels) {
    out.push_back({{}, &v, level});
    return;
  }
  const bool object = v.is_object();
  out.push_back({object ? "{\n" : "[\n"});
  size_t i = 0;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string head(size_t(2 * (level + 1)), ' ');
    if (object) head += json(it.key()).dump() + ": ";
    out.push_back({std::move(head)});
    plan(*it, level + 1, out);
    out.push_back({++i < v.size() ? ",\n" : "\n"});
  }
  out.push_back({std::string(size_t(2 * level), ' ') + (object ? "}" : "]")});
}

// A value's dump(2) as it stands `level` levels down: every line after the first indented by
// two spaces per level (strings never hold a raw newline: dump escapes it).
std::string dumped_at(const json& v, int level) {
  const std::string text = v.dump(2);
  if (level == 0) return text;
  const std::string pad(size_t(2 * level), ' ');
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

void write_json_indented(const json& value, std::ostream& out) {
  std::vector<Piece> pieces;
  plan(value, 0, pieces);
  std::vector<size_t> dumps;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].value) dumps.push_back(i);
  // A batch of values at a time, written out and freed before the next (issue 29: at 100,000
  // ranks the whole text, half a gigabyte, was held until the end, in memory first touched for it).
  constexpr size_t kBatch = 4096;  // values per batch: a few MB of text, one thread start per batch
  size_t written = 0;
  for (size_t first = 0; first < dumps.size(); first += kBatch) {
    const size_t n = std::min(kBatch, dumps.size() - first);
    parallel_for(n, [&](size_t k) {
      Piece& p = pieces[dumps[first + k]];
      p.text = dumped_at(*p.value, p.level);
    });
    const size_t upto = first + n < dumps.size() ? dumps[first + n] : pieces.size();
    for (; written < upto; ++written) {
      out << pieces[written].text;
      std::string().swap(pieces[written].text);
    }
  }
  for (; written < pieces.size(); ++written) out << pieces[written].text;
}

}  // namespace laggard::report
