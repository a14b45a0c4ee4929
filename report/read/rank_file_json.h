// Any rank file as the JSON document of docs/schema.md, for `laggard cat`: a JSON segment as it
// is (every schema version), a version 5 frame file as the JSON segment of the same windows would
// be (the last whole frame's header, then every whole frame's window, its GPU columns turned back
// into `kernels` and `records`).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace laggard::report {

struct RankFileJson {
  nlohmann::ordered_json doc;  // null when nothing could be read
  std::string problem;         // empty, or what was wrong (a torn tail: `doc` holds the whole frames)
};

// Never throws: a file that is no rank file gives a null doc and the problem.
RankFileJson rank_file_json(std::string_view text);

}  // namespace laggard::report
