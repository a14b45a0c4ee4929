// `laggard watch`: the watch state, the Prometheus exposition, the /metrics server and the Grafana
// dashboard's queries.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "metrics_server.h"
#include "render_prometheus.h"
#include "render_watch.h"
#include "synthetic_run.h"
#include "steps.h"
#include "watch_state.h"

namespace laggard {
namespace watch_test {

using report::WatchState;

WatchState slow_rank_state(int slow_rank) {
  synth::Spec spec;
  spec.ranks = 4;
  spec.gpu = false;
  spec.faults.push_back({synth::Fault::Kind::slow_gpu, slow_rank, 2.0});
  return report::summarize_for_watch(synth::make_run(spec), {}, "");
}

// Every line of the text format 0.0.4: a HELP or TYPE comment, or `name{labels} value`.
void expect_valid_exposition(const std::string& text) {
  static const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* [^\n]*)");
  static const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (gauge|counter|untyped))");
  static const std::regex label(R"([a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*")");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*")*\})? (-?[0-9.e+-]+|NaN))");
  std::set<std::string> typed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, help)) continue;
    if (std::regex_match(line, type)) {
      EXPECT_TRUE(typed.insert(line.substr(7, line.find(' ', 7) - 7)).second) << "TYPE twice: " << line;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, sample)) << "not a sample line: " << line;
    EXPECT_TRUE(typed.count(m[1].str())) << "sample before its TYPE: " << line;
  }
}

TEST(WatchState, NamesTheSlowRankAsStraggler) {
  WatchState st = slow_rank_state(2);
  ASSERT_EQ(st.ranks.size(), 4u);
  for (const auto& r : st.ranks) EXPECT_EQ(r.straggler, r.rank == 2) << r.rank;
  EXPECT_LT(*st.ranks[2].worst_relative, 0.75);
  EXPECT_GE(st.newest.index, 0);
  EXPECT_EQ(st.newest.ranks.size(), 4u);
  EXPECT_GT(st.ranks[2].steps, 0u);
  ASSERT_TRUE(st.ranks[2].step_median_ns);
}

TEST(Prometheus, LabelValuesEscapeBackslashQuoteNewlineAndBadUtf8) {
  EXPECT_EQ(report::prometheus_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(report::prometheus_label_value("caf\xC3\xA9"), "caf\xC3\xA9");              // valid UTF-8 kept
  EXPECT_EQ(report::prometheus_label_value("x\xFFy"), "x\xEF\xBF\xBDy");                 // not UTF-8
  EXPECT_EQ(report::prometheus_label_value("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(report::prometheus_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");    // overlong '/'
}

TEST(Prometheus, HostileSectionAndHostNamesStayInsideTheirLabel) {
  WatchState st = slow_rank_state(1);
  const std::string evil = "x\"} 1\nlaggard_straggler{rank=\"0\"} 9\\";
  st.ranks[0].host = evil;
  st.ranks[0].sections[evil].relative = 0.5;
  std::string text = report::render_prometheus(st, 0.01, 1'800'000'000'000'000'000);
  expect_valid_exposition(text);
  EXPECT_EQ(text.find("\nlaggard_straggler{rank=\"0\"} 9"), std::string::npos);
  EXPECT_NE(text.find("section=\"x\\\"} 1\\nlaggard_straggler{rank=\\\"0\\\"} 9\\\\\""), std::string::npos) << text;
}

TEST(Prometheus, ServesEveryNamedMetricWithScoresOfTheStraggler) {
  WatchState st = slow_rank_state(3);
  std::string text = report::render_prometheus(st, 0.01, 1'800'000'000'000'000'000);
  expect_valid_exposition(text);
  for (const std::string& name : report::prometheus_metric_names()) {
    EXPECT_EQ(name.rfind("laggard_", 0), 0u) << name;
    EXPECT_NE(text.find("# TYPE " + name + " gauge\n"), std::string::npos) << name;
  }
  EXPECT_NE(text.find("laggard_straggler{rank=\"3\",host=\"node0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("laggard_straggler{rank=\"0\",host=\"node0\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("laggard_section_relative_score{rank=\"3\",host=\"node0\",section=\""), std::string::npos);
  EXPECT_NE(text.find("laggard_step_median_seconds{rank=\"3\""), std::string::npos);
}

size_t samples_of(const std::string& text, const std::string& metric, const std::string& rank_label = "") {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(metric + "{" + rank_label, 0) == 0) ++n;
  return n;
}

// 10,000 ranks x 50 sections would be 500,000 series per family: above the budget only straggler
// ranks keep their per-section samples, the rest are counted as left out, and every rank still
// has its lowest section score.
TEST(Prometheus, PerSectionSeriesBeyondTheBudgetKeepOnlyStragglerRanks) {
  WatchState st = slow_rank_state(3);
  size_t pairs = 0, straggler_pairs = 0;
  for (const auto& r : st.ranks) {
    pairs += r.sections.size();
    if (r.straggler) straggler_pairs += r.sections.size();
  }
  ASSERT_GT(pairs, straggler_pairs);
  ASSERT_GT(straggler_pairs, 0u);

  std::string all = report::render_prometheus(st, 0.01, 1'800'000'000'000'000'000);  // default budget
  EXPECT_EQ(samples_of(all, "laggard_section_median_seconds"), pairs);
  EXPECT_NE(all.find("laggard_section_series_left_out 0\n"), std::string::npos);

  std::string capped = report::render_prometheus(st, 0.01, 1'800'000'000'000'000'000, pairs - 1);
  expect_valid_exposition(capped);
  EXPECT_EQ(samples_of(capped, "laggard_section_median_seconds"), straggler_pairs);
  EXPECT_EQ(samples_of(capped, "laggard_section_median_seconds", "rank=\"3\""), straggler_pairs);
  EXPECT_EQ(samples_of(capped, "laggard_section_median_seconds", "rank=\"0\""), 0u);
  EXPECT_NE(capped.find("laggard_section_series_left_out "), std::string::npos);
  EXPECT_EQ(capped.find("laggard_section_series_left_out 0\n"), std::string::npos);
  for (const auto& r : st.ranks)  // every rank's weakest section, whatever the budget
    EXPECT_EQ(samples_of(capped, "laggard_rank_min_section_relative_score", "rank=\"" + std::to_string(r.rank) + "\""),
              r.worst_relative ? 1u : 0u);
  const std::string min3 = "laggard_rank_min_section_relative_score{rank=\"3\",host=\"node0\"} ";
  ASSERT_NE(capped.find(min3), std::string::npos);
  EXPECT_DOUBLE_EQ(std::stod(capped.substr(capped.find(min3) + min3.size())), *st.ranks[3].worst_relative);
}

TEST(Prometheus, RunWithoutFilesYetStillRendersTheRunLevelGauges) {
  WatchState st;
  st.waiting = "no laggard rank files";
  std::string text = report::render_prometheus(st, 0, 0);
  expect_valid_exposition(text);
  EXPECT_NE(text.find("laggard_ranks 0\n"), std::string::npos);
}

TEST(WatchView, EscapesNamesAndShowsStragglersAndNewestWindow) {
  WatchState st = slow_rank_state(2);
  st.ranks[2].host = "evil\x1b[2J";
  std::ostringstream out;
  report::render_watch(st, {20, 1, "", 1'800'000'000'000'000'000}, out);
  std::string text = out.str();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("evil\\x1b[2J"), std::string::npos);
  EXPECT_NE(text.find("Stragglers ("), std::string::npos) << text;
  EXPECT_NE(text.find("Newest window #"), std::string::npos) << text;
}

// Issue 30: a star in the rank table says which score made the rank a straggler (it may be another
// section, or another metric, than the worst relative score the row shows).
TEST(WatchView, AStarNamesTheScoreBehindIt) {
  synth::Spec spec;
  spec.ranks = 4;
  spec.gpu = false;
  spec.steps = 40;
  spec.window_s = 0.005;  // a few steps per window: individual scores per window
  spec.faults.push_back({synth::Fault::Kind::slow_gpu, 2, 3.0, 0, "optimizer", 20, 40});  // late steps only
  WatchState st = report::summarize_for_watch(synth::make_run(spec), {}, "");
  ASSERT_EQ(st.ranks.size(), 4u);
  const report::WatchRank& slow = st.ranks[2];
  ASSERT_TRUE(slow.straggler);
  ASSERT_TRUE(slow.flagged_by.has_value());
  EXPECT_EQ(slow.flagged_by->section, "optimizer");  // slower than its own best: the individual score
  EXPECT_EQ(slow.flagged_by->metric, "individual");
  for (const report::Straggler& s : st.stragglers) {
    if (s.rank == 2) {
      EXPECT_GE(s.score, slow.flagged_by->score) << "the lowest score is named";
    }
  }
  std::ostringstream out;
  report::render_watch(st, {20, 1, "", 1'800'000'000'000'000'000}, out);
  std::istringstream lines(out.str());
  size_t starred = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("* ", 0) != 0) continue;
    ++starred;
    const std::string says = fmt::format("{} {} ", slow.flagged_by->section, slow.flagged_by->metric);
    EXPECT_NE(line.find(says), std::string::npos) << line;  // was: a bare star
    EXPECT_EQ(line.back() == ' ', false);
  }
  EXPECT_EQ(starred, 1u) << out.str();
}

TEST(Endpoint, ParsesHostPortForms) {
  EXPECT_EQ(cli::parse_endpoint("9400").host, "127.0.0.1");
  EXPECT_EQ(cli::parse_endpoint(":9400").host, "127.0.0.1");
  EXPECT_EQ(cli::parse_endpoint("0.0.0.0:9400").host, "0.0.0.0");
  EXPECT_EQ(cli::parse_endpoint("[::1]:9400").host, "::1");
  EXPECT_EQ(cli::parse_endpoint("[::1]:9400").port, "9400");
  EXPECT_THROW(cli::parse_endpoint("host:"), std::invalid_argument);
  EXPECT_THROW(cli::parse_endpoint("host:70000"), std::invalid_argument);
  EXPECT_THROW(cli::parse_endpoint("::1:80"), std::invalid_argument);
}

using laggard::testing::http_exchange;
using laggard::testing::port_of;

TEST(MetricsServer, AnswersMetrics404AndBoundsTheRequest) {
  cli::MetricsServer server(cli::parse_endpoint("127.0.0.1:0"), report::kPrometheusContentType);
  server.publish("laggard_ranks 4\n");
  int port = port_of(server);
  std::string ok = http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(ok.find("Content-Length: 16\r\n"), std::string::npos);
  EXPECT_EQ(ok.substr(ok.size() - 16), "laggard_ranks 4\n");
  EXPECT_EQ(http_exchange(port, "GET /metricsx HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http_exchange(port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http_exchange(port, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(http_exchange(port, "nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(http_exchange(port, huge).rfind("HTTP/1.1 431", 0), 0u);
  std::string head = http_exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(head.find("laggard_ranks"), std::string::npos);
}

TEST(MetricsServer, ConcurrentScrapesAllGetTheNewestBody) {
  cli::MetricsServer server(cli::parse_endpoint("127.0.0.1:0"), report::kPrometheusContentType);
  server.publish(std::string(100000, '#') + "\n");
  int port = port_of(server);
  // A client that connects and says nothing holds one worker; the others must still answer.
  int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::vector<std::string> replies(12);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i)
    clients.emplace_back([&, i] { replies[i] = http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"); });
  for (auto& t : clients) t.join();
  for (const std::string& r : replies) {
    EXPECT_EQ(r.rfind("HTTP/1.1 200 OK", 0), 0u);
    EXPECT_NE(r.find(std::string(100000, '#')), std::string::npos);
  }
  close(idle);
}

TEST(MetricsServer, StopsAtOnceWhileAClientSaysNothing) {
  auto server = std::make_unique<cli::MetricsServer>(cli::parse_endpoint("127.0.0.1:0"), report::kPrometheusContentType);
  int port = port_of(*server);
  int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a worker now waits for its request
  auto t0 = std::chrono::steady_clock::now();
  server.reset();
  // Without the shutdown the worker sits out its 5 s receive timeout.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  close(idle);
}

// docs/report.md's table of metrics names every metric /metrics can serve.
TEST(Prometheus, EveryMetricIsDocumented) {
  std::ifstream in(LAGGARD_REPORT_DOC);
  ASSERT_TRUE(in) << LAGGARD_REPORT_DOC;
  std::stringstream doc;
  doc << in.rdbuf();
  for (const std::string& name : report::prometheus_metric_names())
    EXPECT_NE(doc.str().find("`" + name + "`"), std::string::npos) << name << " is missing from docs/report.md";
}

// docs/grafana-dashboard.json: every PromQL expression may name only metrics laggard serves and
// only the labels it (or Prometheus, at scrape) attaches.
TEST(GrafanaDashboard, QueriesUseOnlyServedMetricsAndLabels) {
  std::ifstream in(LAGGARD_DASHBOARD);
  ASSERT_TRUE(in) << LAGGARD_DASHBOARD;
  nlohmann::json dash = nlohmann::json::parse(in);
  std::vector<std::string> exprs;
  auto walk = [&](auto&& self, const nlohmann::json& j) -> void {
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        if ((it.key() == "expr" || it.key() == "definition") && it->is_string())
          exprs.push_back(it->get<std::string>());
        self(self, *it);
      }
    } else if (j.is_array()) {
      for (const auto& e : j) self(self, e);
    }
  };
  walk(walk, dash);
  ASSERT_GE(exprs.size(), 5u);
  const auto& served = report::prometheus_metric_names();
  std::set<std::string> names(served.begin(), served.end());
  const std::set<std::string> labels = {"rank", "host", "section", "run_id", "dir", "job", "instance"};
  // PromQL words that may stand before "(" or "{" or "by": functions, aggregations, keywords.
  const std::regex word(R"([a-zA-Z_:][a-zA-Z0-9_:]*)");
  const std::regex selector(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\})");
  const std::regex matcher(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=))");
  const std::regex grouping(R"(\b(by|without)\s*\(([^)]*)\))");
  for (const std::string& raw : exprs) {
    std::string e = std::regex_replace(raw, std::regex(R"("(\\.|[^"\\])*")"), "\"\"");  // drop string literals
    e = std::regex_replace(e, std::regex(R"(\$[a-zA-Z_]+|\[\$?[a-zA-Z0-9_]+\])"), "");      // $vars, [5m] ranges
    bool any = false;
    for (std::sregex_iterator it(e.begin(), e.end(), word), end; it != end; ++it) {
      std::string w = it->str();
      if (w.rfind("laggard", 0) == 0) {
        EXPECT_TRUE(names.count(w)) << "'" << w << "' is not served, in: " << raw;
        any = true;
      }
    }
    EXPECT_TRUE(any) << "no laggard metric in: " << raw;
    for (std::sregex_iterator it(e.begin(), e.end(), selector), end; it != end; ++it) {
      EXPECT_TRUE(names.count((*it)[1].str())) << "selector of '" << (*it)[1] << "' in: " << raw;
      std::string inner = (*it)[2].str();
      for (std::sregex_iterator m(inner.begin(), inner.end(), matcher); m != end; ++m)
        EXPECT_TRUE(labels.count((*m)[1].str())) << "label '" << (*m)[1] << "' in: " << raw;
    }
    for (std::sregex_iterator it(e.begin(), e.end(), grouping), end; it != end; ++it) {
      std::string inner = (*it)[2].str();
      for (std::sregex_iterator m(inner.begin(), inner.end(), word); m != end; ++m)
        EXPECT_TRUE(labels.count(m->str())) << "grouping label '" << m->str() << "' in: " << raw;
    }
  }
}

}  // namespace
}  // namespace laggard

namespace laggard {
namespace watch_test {

// A live run cut mid-step: the next step's data load (a short top-level range) has closed, the step
// around it has not, so the data load is one occurrence per rank more frequent. The step is still
// the step (before: the data load won, and `laggard watch` showed its time as the step time).
TEST(WatchSteps, AnOpenStepDoesNotLoseToTheNextDataLoad) {
  report::RunModel m;
  for (int rank = 0; rank < 2; ++rank) {
    report::RankData r;
    r.rank = rank;
    report::CaptureWindow w;
    report::SectionWindow step{"step", "", "", 10, 10 * 25'000'000};
    report::SectionWindow load{"data_load", "", "", 11, 11 * 2'500'000};
    for (int i = 0; i < 10; ++i) step.occurrences.push_back({1'000'000'000 + i * 25'000'000, 25'000'000, 1, 1});
    for (int i = 0; i < 11; ++i) load.occurrences.push_back({1'000'000'000 + i * 25'000'000, 2'500'000, 2, 1});
    w.sections = {step, load};
    r.windows.push_back(w);
    m.ranks.push_back(r);
  }
  report::StepSet steps = report::detect_steps(m, "");
  EXPECT_EQ(steps.section, "step") << steps.source;
}

}  // namespace
}  // namespace laggard
