// The JSON report's text: nlohmann's dump(2), with the top-level members dumped on every core.
// At 960 ranks the report is tens of MB and one thread took half a second to write it.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace laggard::report {

// Exactly what out << value.dump(2) writes (the tests hold it to that).
void write_json_indented(const nlohmann::json& value, std::ostream& out);

}  // namespace laggard::report
