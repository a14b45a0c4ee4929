// NVRx's own reports (`laggard report --nvrx-compatible`, nvrx_compat.h) as JSON and text.
#pragma once

#include <cstddef>
#include <ostream>

#include <nlohmann/json.hpp>

#include "nvrx_compat.h"

namespace laggard::report {

// Report fields by NVRx's names (Report, identify_stragglers); NaN scores are null.
nlohmann::json nvrx_json(const NvrxRunReport& n);

// Each report's straggler lists, and the lowest scores of its last report.
void nvrx_text(const NvrxRunReport& n, size_t top, std::ostream& out);

}  // namespace laggard::report
