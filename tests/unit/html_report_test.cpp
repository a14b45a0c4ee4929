// The HTML report (issue 15): escaping of every untrusted string, the page's policy, its parts,
// and its size at 10,000 ranks. The real browser test is tests/integration/html_browser_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "health_analysis.h"
#include "hostile_run.h"
#include "render_html.h"
#include "render_html_parts.h"
#include "report_command.h"

namespace laggard::report {
namespace html_report_test {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HtmlEscape, TextAndAttributeMetacharactersBecomeEntities) {
  EXPECT_EQ(escape_html("<img src=x onerror=alert(1)>"), "&lt;img src=x onerror=alert(1)&gt;");
  EXPECT_EQ(escape_html("a&b \"q\" 'q'"), "a&amp;b &quot;q&quot; &#39;q&#39;");
  EXPECT_EQ(escape_html("</script>"), "&lt;/script&gt;");
  EXPECT_EQ(escape_html("plain name_1 · µs"), "plain name_1 · µs");  // UTF-8 stays as is
}

TEST(HtmlEscape, ControlCharactersAreMadeVisible) {
  EXPECT_EQ(escape_html("a\x1b[31mb"), "a\\x1b[31mb");
  EXPECT_EQ(escape_html("x\ny"), "x\\ny");
  EXPECT_EQ(escape_html("\xc2\x9b"), "\\u009b");  // C1 CSI
}

TEST(HtmlEscape, ScriptJsonCannotEndItsBlock) {
  EXPECT_EQ(escape_script_json(R"({"a":"</script><!--&"})"), R"({"a":"\u003c/script\u003e\u003c!--\u0026"})");
  EXPECT_EQ(escape_script_json("\"\xe2\x80\xa8\xe2\x80\xa9\""), "\"\\u2028\\u2029\"");
  EXPECT_EQ(escape_script_json("\"\xe2\x80\xa7\""), "\"\xe2\x80\xa7\"");  // U+2027 is no line break
  // Still the same JSON value.
  std::string s = escape_script_json(nlohmann::json{{"k", "<b>&\xe2\x80\xa8"}}.dump());
  EXPECT_EQ(nlohmann::json::parse(s)["k"], "<b>&\xe2\x80\xa8");
}

struct Rendered {
  std::string html, out, err;
  int rc = -1;
};

// Through the CLI code path (`laggard report --html FILE`), from a model instead of files.
Rendered render_via_cli(RunModel m, const std::string& name) {
  std::filesystem::path file = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".html");
  cli::ReportOptions o;
  o.html = file.string();
  std::ostringstream out, err;
  Rendered r;
  r.rc = cli::report_model(m, o, out, err);
  r.out = out.str();
  r.err = err.str();
  std::ifstream in(file);
  r.html.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(file);
  return r;
}

TEST(HtmlReport, HostileNamesRenderAsText) {
  Rendered r = render_via_cli(synth::hostile_run(), "hostile");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string& h = r.html;
  ASSERT_FALSE(h.empty());
  // Not one raw attack survives: no element or attribute the names could have made.
  for (const std::string& raw : {synth::kImgAttack, synth::kScriptAttack, synth::kKernelAttack, synth::kHostAttack,
                                 std::string("<script>alert"), std::string("<iframe"), std::string("<img"),
                                 std::string("<svg onload"), std::string("\" onmouseover"), std::string("<!--")})
    EXPECT_EQ(h.find(raw), std::string::npos) << raw;
  // They are there, as text.
  EXPECT_NE(h.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(h.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(h.find("&lt;iframe src=https://example.invalid/&gt;"), std::string::npos);
  EXPECT_NE(h.find("opt&quot; onmouseover=&quot;alert(1)&quot; x=&#39;"), std::string::npos);
  // One script element only: the non-executed JSON summary, whose strings are \u escaped.
  EXPECT_EQ(count(h, "<script"), 1u);
  EXPECT_EQ(count(h, "</script>"), 1u);
  size_t json_at = h.find("<script type=\"application/json\" id=\"laggard-summary\">");
  ASSERT_NE(json_at, std::string::npos);
  json_at = h.find('>', json_at) + 1;
  nlohmann::json summary = nlohmann::json::parse(h.substr(json_at, h.find("</script>") - json_at));
  EXPECT_EQ(summary["run_id"], "run-<b>bold</b>");
  ASSERT_FALSE(summary["findings"].empty());
  EXPECT_EQ(summary["findings"][0]["rank"], 3);
  EXPECT_EQ(summary["findings"][0]["section"], synth::kImgAttack);
}

TEST(HtmlReport, PolicyForbidsScriptAndEveryFetch) {
  Rendered r = render_via_cli(synth::hostile_run(), "policy");
  const std::string& h = r.html;
  size_t csp = h.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; ");
  ASSERT_NE(csp, std::string::npos);
  EXPECT_LT(csp, h.find("<title>"));  // before anything that could load
  EXPECT_NE(h.find("script-src 'none'"), std::string::npos);
  // Nothing refers outside the page: no src attributes, only in-page links.
  EXPECT_EQ(h.find(" src=\""), std::string::npos);
  EXPECT_EQ(h.find(" src='"), std::string::npos);
  EXPECT_EQ(h.find("url("), std::string::npos);
  EXPECT_EQ(h.find("@import"), std::string::npos);
  for (size_t at = h.find("href=\""); at != std::string::npos; at = h.find("href=\"", at + 1))
    EXPECT_EQ(h[at + 6], '#') << h.substr(at, 40);
}

TEST(HtmlReport, VerdictComesFirstAndEveryPartIsThere) {
  Rendered r = render_via_cli(synth::hostile_run(), "parts");
  const std::string& h = r.html;
  size_t verdict = h.find("<section id=\"verdict\">");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_NE(h.find("id=\"finding-1\""), std::string::npos);
  for (const char* id : {"id=\"completeness\"", "id=\"heatmap-chart\"", "id=\"gpu-heatmap-chart\"", "id=\"steptime-chart\"", "id=\"dist-0\"",
                         "id=\"nccl-blame-chart\"", "id=\"nccl-arrival-chart\"", "id=\"hta-temporal-chart\"",
                         "id=\"hta-idle-chart\"", "id=\"hta-types-chart\"", "id=\"hta-top-kernels-chart\""}) {
    size_t at = h.find(id);
    EXPECT_NE(at, std::string::npos) << id;
    if (at != std::string::npos) {
      EXPECT_GT(at, verdict) << id;
    }
  }
  // The problem with its (hostile) message is a completeness warning.
  EXPECT_NE(h.find("&lt;script&gt;alert(&#39;problem&#39;)&lt;/script&gt;"), std::string::npos);
  // The slow rank is the first finding, and its GPU score is the one below the threshold.
  EXPECT_NE(h.find("1. rank 3 ("), std::string::npos);
  size_t gpu_map = h.find("id=\"gpu-heatmap-chart\"");
  ASSERT_NE(gpu_map, std::string::npos);
  const std::string cell = " · all kernels: relative score ";
  size_t cells = 0;
  for (size_t at = h.find(cell, gpu_map); at != std::string::npos && at < h.find("</svg>", gpu_map);
       at = h.find(cell, at + 1), ++cells) {
    double score = std::stod(h.substr(at + cell.size(), 5));
    bool slow_rank = h.rfind("<title>rank 3 (", at) == h.rfind("<title>", at);
    if (slow_rank) EXPECT_LT(score, 0.9);
    else EXPECT_GT(score, 0.95);
  }
  EXPECT_EQ(cells, 8u);
}

// Issue 30: the heat map's palette diverges around the threshold (blue when fine, red below), so a
// healthy 0.93 is blue, never the grey the caption gave "no score"; a cell without a score is white
// with a grey cross, and the scale is drawn under the map.
TEST(HtmlReport, HeatMapPaletteTellsHealthyFromNoScoreAndDrawsItsScale) {
  struct Rgb {
    int r, g, b;
  };
  auto rgb = [](const std::string& hex) {
    return Rgb{std::stoi(hex.substr(1, 2), nullptr, 16), std::stoi(hex.substr(3, 2), nullptr, 16),
               std::stoi(hex.substr(5, 2), nullptr, 16)};
  };
  for (double healthy : {0.9, 0.93, 0.97, 1.0}) {
    Rgb c = rgb(html::score_colour(healthy, 0.75));
    EXPECT_GT(c.b - c.r, 60) << healthy << ": blue, not a grey (was #d5cec7 at 0.93)";
  }
  for (double slow : {0.5, 0.6, 0.7}) {
    Rgb c = rgb(html::score_colour(slow, 0.75));
    EXPECT_GT(c.r - c.b, 60) << slow;
  }
  Rgb at = rgb(html::score_colour(0.75, 0.75));
  EXPECT_GT(at.r, 200);  // yellow at the threshold
  EXPECT_GT(at.g, 200);

  synth::Spec spec;
  spec.gpu = false;
  spec.ranks = 4;
  RunModel m = synth::make_run(spec);
  for (CaptureWindow& w : m.ranks[1].windows)  // rank 1 never ran "optimizer": no score there
    std::erase_if(w.sections, [](const SectionWindow& s) { return s.name == "optimizer"; });
  Rendered r = render_via_cli(m, "palette");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string& h = r.html;
  size_t map = h.find("id=\"heatmap-chart\""), end = h.find("</svg>", map);
  ASSERT_NE(map, std::string::npos);
  const std::string map_svg = h.substr(map, end - map);
  EXPECT_NE(map_svg.find("optimizer: no score</title>"), std::string::npos);
  EXPECT_NE(map_svg.find("fill=\"#ffffff\"><title>rank 1"), std::string::npos) << "a white cell for rank 1";
  EXPECT_EQ(map_svg.find("#e4e4e4"), std::string::npos) << "the old grey";
  EXPECT_NE(map_svg.find("0.75 threshold"), std::string::npos) << "the colour scale";
  EXPECT_NE(map_svg.find(">no score</text>"), std::string::npos) << "the scale's no-score swatch";
}

TEST(HtmlReport, UnwritableFileIsAnError) {
  RunModel m = synth::hostile_run(4);
  cli::ReportOptions o;
  o.html = "/nonexistent-dir/x.html";
  std::ostringstream out, err;
  EXPECT_EQ(cli::report_model(m, o, out, err), 2);
  EXPECT_NE(err.str().find("cannot write '/nonexistent-dir/x.html'"), std::string::npos);
}

// 10,000 ranks: the page stays small and its DOM bounded (binned heat map, top-N bars and tables).
TEST(HtmlReport, TenThousandRanksStayBounded) {
  synth::Spec s;
  s.gpu = false;  // NVTX only: cheap to simulate at this size
  s.ranks = 10'000;
  s.ranks_per_host = 8;
  s.steps = 12;
  s.window_s = 0.5;
  s.kernels = {{"fwd", "forward", 2'000'000}, {"bwd", "backward", 4'000'000}, {"opt", "optimizer", 500'000}};
  s.faults.push_back({synth::Fault::Kind::slow_gpu, 4321, 1.6, 0, "backward"});
  RunModel m = synth::make_run(s);
  ScoreReport sc = compute_scores(m, {});
  Analyses a = run_analyses(m, sc, {});
  std::ostringstream page;
  auto t0 = std::chrono::steady_clock::now();
  render_html(m, sc, a, HealthReport{}, page);
  double render_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string h = page.str();
  size_t elements = count(h, "<") - count(h, "</");
  std::cout << "10,000 ranks: " << h.size() << " bytes, ~" << elements << " elements, rendered in " << render_s
            << " s\n";
  EXPECT_LT(h.size(), 1'000'000u);
  EXPECT_LT(elements, 8'000u);
  EXPECT_NE(h.find("rank 4321"), std::string::npos);  // the straggler is still named
  EXPECT_NE(h.find("rows of"), std::string::npos);    // the heat map says it binned ranks
}

}  // namespace
}  // namespace laggard::report
