// Renderers of a scored run: plain text for people, JSON for tools and tests.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "model.h"
#include "scores.h"

namespace laggard::report {

void render_text(const RunModel& model, const ScoreReport& scores, std::ostream& out);
nlohmann::json render_json(const RunModel& model, const ScoreReport& scores);

}  // namespace laggard::report
