// `laggard report DIR --html FILE`: one self-contained HTML page (inline CSS and SVG drawn here,
// no script, no fetch of any kind) with the verdict first, then the data-completeness warnings,
// a rank x section heat map of the NVRx scores, step time per rank, duration distributions of
// the worst sections, NCCL arrival skew and blame, and the HTA breakdowns as charts.
//
// Every string from a trace (NVTX and kernel names, hosts, problems) is untrusted: it reaches the
// page only through escape_html (text and attribute values) or escape_script_json (the JSON
// summary in a non-executed <script type="application/json"> block), and the page's
// Content-Security-Policy (default-src 'none', inline styles only) forbids any script and any
// fetch, so even an escaping bug can neither run code nor reach the network.
//
// Sized for 10,000 ranks: tables and bar charts show the top N ranks plus an "others" summary,
// the heat map bins consecutive ranks (each cell the worst score of its bin), the step-time chart
// draws a band over all ranks and lines only for the highlighted ones.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "analyses.h"
#include "health_analysis.h"
#include "model.h"
#include "scores.h"

namespace laggard::report {

struct HtmlOptions {
  size_t top = 20;            // rows per table and bars per chart; the rest go into "others"
  size_t heat_rows = 96;      // heat map rows at most (more ranks: consecutive ranks binned)
  size_t heat_columns = 24;   // sections in the heat map at most (worst first)
  size_t highlight = 6;       // ranks drawn as their own line in the step-time chart
  size_t distributions = 4;   // sections whose duration distributions are drawn
  std::string cut;            // the cut the report covers, as describe_cut says it ("": none)
};

// The page's policy: nothing may load or run; inline <style> only.
inline constexpr std::string_view kHtmlCsp =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'; "
    "base-uri 'none'; form-action 'none'";

void render_html(const RunModel& model, const ScoreReport& scores, const Analyses& analyses,
                 const HealthReport& health, std::ostream& out, const HtmlOptions& options = {});

// Text or attribute value: & < > " ' as entities; C0/C1 controls and DEL made visible as in text
// output (\x1b, \u009b: text_escape.h), so no name can hide or forge part of the page.
std::string escape_html(std::string_view s);

// A JSON text made safe inside <script type="application/json">: < > & U+2028 U+2029 as \u escapes
// (they occur only inside JSON strings, where the escape means the same character), so a string
// holding "</script>" or "<!--" cannot end the block.
std::string escape_script_json(std::string_view json_text);

}  // namespace laggard::report
