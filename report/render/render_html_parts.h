// The parts of the HTML report (render_html.h), each a pure function of the analyses that
// returns one <section> of the page.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "render_html.h"

namespace laggard::report::html {

struct Page {
  const RunModel& model;
  const ScoreReport& scores;
  const Analyses& analyses;
  const HealthReport& health;
  const HtmlOptions& options;
  std::map<int, size_t> index_of_rank;  // rank -> index in model.ranks (and scores.ranks)
  std::vector<int> highlighted;         // ranks of the findings, then the stragglers, worst first

  std::string rank_label(int rank) const;  // "rank 3 (node0)"
};

// render_html_charts.cpp
std::string heat_map_section(const Page& p);
std::string step_time_section(const Page& p);
std::string distributions_section(const Page& p);
std::string nccl_section(const Page& p);
std::string hta_section(const Page& p);

// Heat map colour of a score: a diverging palette, blue at 1, yellow at the threshold, dark red a
// quarter below it and lower (no grey: "no score" is drawn apart).
std::string score_colour(double score, double threshold);

}  // namespace laggard::report::html
