// Renderers of a scored run: plain text for people, JSON for tools and tests.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "analyses.h"
#include "model.h"
#include "scores.h"

namespace laggard::report {

// With analyses, the verdict comes right after the problems and the analyses at the end;
// `top` bounds the rows of per-rank, per-step and per-kernel tables.
void render_text(const RunModel& model, const ScoreReport& scores, std::ostream& out,
                 const Analyses* analyses = nullptr, size_t top = 5);
nlohmann::json render_json(const RunModel& model, const ScoreReport& scores);

}  // namespace laggard::report
