#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "render.h"
#include "scores.h"
#include "stats.h"

namespace laggard::report {
namespace scores_test {

constexpr int64_t kS = 1'000'000'000;

// The hand-computed NVRx examples below score single occurrences, as NVRx does (no minimum), and
// their sections are a few ns in 1 s windows: below any material share. The share filter (issue 9
// item 6) and the sample minimum (issue 10 item 8) have their own tests.
ScoreOptions nvrx() {
  ScoreOptions o;
  o.min_samples = 1;
  o.min_share = 0;
  return o;
}
const ScoreOptions kEveryShare = nvrx();

// One rank whose section `name` took `durs[w]` in report window w (1 s windows from t=0).
RankData rank_with(int rank, const std::string& name, const std::vector<std::vector<int64_t>>& durs) {
  RankData r;
  r.rank = rank;
  r.host = "h" + std::to_string(rank);
  r.flush_s = 1;
  r.final = true;
  for (size_t w = 0; w < durs.size(); ++w) {
    CaptureWindow cw;
    cw.index = w;
    cw.start_ns = int64_t(w) * kS;
    cw.end_ns = cw.start_ns + kS;
    SectionWindow s;
    s.name = name;
    for (size_t i = 0; i < durs[w].size(); ++i)
      s.occurrences.push_back({cw.start_ns + int64_t(i) * 1000, durs[w][i], 1, 1.0});
    s.count = durs[w].size();
    for (int64_t d : durs[w]) s.total_ns += d;
    cw.sections.push_back(s);
    r.windows.push_back(cw);
  }
  return r;
}

TEST(Stats, Median) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

// The branchless quickselect (stats.cpp select_nth) must give exactly what a sort gives, on spread,
// clustered, tied, outlier-heavy and non-finite data, odd and even sizes, at and beside the size
// where it hands small ranges to std::nth_element.
TEST(Stats, SelectionGivesWhatASortGives) {
  std::mt19937_64 rng(29);
  auto check = [](std::vector<double> v, const char* what) {
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = v.size();
    const double want = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    EXPECT_EQ(median(v), want) << what << " n=" << n;
    // In place, the range is left with its larger half from the middle on (what the breakdown's
    // percentile reads next).
    std::vector<double> m = v;
    median_in_place(m);
    if (std::none_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) {
      EXPECT_LE(*std::max_element(m.begin(), m.begin() + n / 2), *std::min_element(m.begin() + n / 2, m.end()))
          << what << " n=" << n;
    }
    for (size_t k : {size_t{0}, n / 3, n / 2, n - 1, (n * 95) / 100}) {
      std::vector<double> w = v;
      EXPECT_EQ(kth_smallest(w.data(), w.data() + w.size(), k), sorted[k]) << what << " k=" << k;
    }
  };
  for (size_t n : {size_t{3}, size_t{24}, size_t{25}, size_t{96}, size_t{960}, size_t{961}, size_t{2048},
                   size_t{2049}, size_t{4096}, size_t{45'001}, size_t{45'000}}) {
    std::vector<double> spread(n), clustered(n), ties(n), outliers(n), tiny(n);
    for (size_t i = 0; i < n; ++i) {
      spread[i] = double(rng() % 1'000'000'000);
      clustered[i] = 5000.0 + double(rng() % 7);
      ties[i] = double(rng() % 3);
      outliers[i] = i % 1000 == 0 ? 1e15 * double(i + 1) : double(rng() % 100'000);
      tiny[i] = 1.0 + double(rng() % 5) * 1e-300;
    }
    check(spread, "spread");
    check(clustered, "clustered");
    check(ties, "ties");
    check(outliers, "outliers");
    check(tiny, "tiny range");
    std::vector<double> same(n, 42);
    check(same, "all equal");
    std::vector<double> negative = spread;
    for (double& x : negative) x = -x;
    check(negative, "negative");
  }
  std::vector<double> with_inf(5000, 1.0);
  with_inf[17] = std::numeric_limits<double>::infinity();
  with_inf[99] = 7;
  check(with_inf, "with infinity");
}

// The selection from a guess (stats.h MedianGuess, used step after step and rank after rank) gives
// exactly what a sort gives, however good or bad the guess: sets that drift slowly, that jump far
// away, all equal, tied, negative, of every small size and even and odd; and with a series of alike
// sets the guess narrows to a sixteenth of the values or fewer (what makes it pay).
TEST(Stats, SelectionFromAGuessGivesWhatASortGives) {
  std::mt19937_64 rng(31);
  MedianGuess for_median, for_kth;
  auto check = [&](const std::vector<double>& v, const std::string& what) {
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = v.size();
    auto get = [&](size_t i) { return v[i]; };
    const double want = n == 0 ? 0 : n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    EXPECT_EQ(median_guessed(n, get, for_median), want) << what << " n=" << n;
    if (n == 0) return;
    for (size_t k : {size_t{0}, n / 2, n - 1, (n * 95) / 100})
      EXPECT_EQ(kth_guessed(n, get, k, for_kth), sorted[k]) << what << " n=" << n << " k=" << k;
  };
  std::normal_distribution<double> spread(20'000, 400);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{25}, size_t{96}, size_t{960}, size_t{961}}) {
    for (int round = 0; round < 30; ++round) {
      std::vector<double> v(n);
      const double drift = 1.0 + 0.002 * round;
      for (double& x : v) x = std::round(spread(rng) * drift);
      check(v, "drifting");
    }
    std::vector<double> far(n), ties(n), same(n, 7), negative(n);
    for (size_t i = 0; i < n; ++i) {
      far[i] = 1e12 + double(rng() % 1000);
      ties[i] = double(rng() % 3);
      negative[i] = -double(rng() % 1'000'000);
    }
    check(far, "far above the guess");
    check(ties, "ties");
    check(ties, "ties again");
    check(same, "all equal");
    check(negative, "far below the guess");
    check(far, "far above again");
  }
  // The middle pair split across two regions: the lower one is the largest of the region before.
  const std::vector<double> ten = {10, 3, 7, 1, 9, 5, 2, 8, 6, 4};
  for (const MedianGuess& g : {MedianGuess{true, 8, 2.5}, MedianGuess{true, 3, 2.5}, MedianGuess{true, 5.5, 0.25}}) {
    for_median = g;
    check(ten, "the middle pair at a region's edge, guess " + std::to_string(g.center));
  }
  // Alike sets: after a few, a sixteenth of the values or fewer fall inside the guess.
  MedianGuess g;
  std::vector<double> v(960);
  for (int round = 0; round < 12; ++round) {
    for (double& x : v) x = std::round(spread(rng));
    (void)median_guessed(v.size(), [&](size_t i) { return v[i]; }, g);
  }
  const size_t inside = size_t(std::count_if(v.begin(), v.end(), [&](double x) {
    return x >= g.center - g.width && x <= g.center + g.width;
  }));
  EXPECT_LE(inside, v.size() / 16 + v.size() / 32) << "width " << g.width;  // the next set's is near that
  EXPECT_GT(g.width, 0);
  // Values that are not numbers: the selection still ends.
  std::vector<double> some_nan(960);
  for (size_t i = 0; i < some_nan.size(); ++i)
    some_nan[i] = i % 7 == 0 ? std::numeric_limits<double>::quiet_NaN() : double(i % 1000);
  (void)median_guessed(some_nan.size(), [&](size_t i) { return some_nan[i]; }, g);
  (void)kth_guessed(some_nan.size(), [&](size_t i) { return some_nan[i]; }, 5, g);
}

// Inputs that defeat a median-of-three pivot (each round then removes two values) and values that
// are not numbers: the selection still ends, with the sorted answer where one exists.
TEST(Stats, SelectionEndsOnAdversarialAndNanInput) {
  // The "median-of-3 killer" order (Musser 1997): organ-pipe values around a rising middle.
  const size_t n = 1600;
  std::vector<double> killer(n);
  for (size_t i = 0; i < n / 2; ++i) {
    killer[i] = double(i % 2 ? n / 2 + i : i + 1);
    killer[n / 2 + i] = double(2 * (i + 1));
  }
  std::vector<double> sorted = killer;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> w = killer;
  EXPECT_EQ(kth_smallest(w.data(), w.data() + n, n / 2), sorted[n / 2]);
  std::vector<double> descending(n), ascending(n);
  for (size_t i = 0; i < n; ++i) descending[i] = double(n - i), ascending[i] = double(i);
  EXPECT_EQ(median(descending), (double(n / 2) + double(n / 2 + 1)) / 2);
  EXPECT_EQ(median(ascending), (double(n / 2 - 1) + double(n / 2)) / 2);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t count : {size_t{100}, size_t{960}, size_t{3000}}) {
    std::vector<double> all_nan(count, nan);
    EXPECT_TRUE(std::isnan(median(all_nan)));
    std::vector<double> some_nan(count);
    for (size_t i = 0; i < count; ++i) some_nan[i] = i % 7 == 0 ? nan : double((i * 7919) % 1000);
    (void)median(some_nan);  // no order exists: ending is what is checked
    (void)kth_smallest(some_nan.data(), some_nan.data() + count, count - 1);
  }
}

TEST(Stats, LowerMedianAsTorchMedian) {
  EXPECT_EQ(lower_weighted_median({{4, 1}, {1, 1}, {3, 1}, {2, 1}}), 2);
  EXPECT_EQ(lower_weighted_median({{5, 1}, {1, 1}, {3, 1}}), 3);
  EXPECT_EQ(lower_weighted_median({{1, 1}, {10, 5}}), 10);
  EXPECT_EQ(lower_weighted_median({{1, 3}, {10, 3}}), 1);
  EXPECT_EQ(lower_weighted_median({{10, 3}, {1, 3}}), 1);  // two values come in either order (stats.cpp sorts two apart)
  EXPECT_EQ(lower_weighted_median({{10, 3}, {10, 1}}), 10);
  EXPECT_EQ(lower_weighted_median({}), 0);
}

TEST(Stats, WeightedMedianMatchesMedianForUnitWeights) {
  EXPECT_EQ(weighted_median({{1, 1}, {2, 1}, {3, 1}, {4, 1}}), 2.5);
  EXPECT_EQ(weighted_median({{5, 1}, {1, 1}, {3, 1}}), 3);
  EXPECT_EQ(weighted_median({{1, 1}, {10, 5}}), 10);  // 10 stands for 5 occurrences
  EXPECT_EQ(weighted_median({{1, 3}, {10, 1}}), 1);
}

// Hand-computed example (window medians in ns; an even count takes the lower middle, as
// torch.median in NVRx does):
//   rank 0: w0 [10,12,14] -> 12, w1 [10,10] -> 10, whole run [10,10,10,12,14] -> 10
//   rank 1: w0 [20,20,21] -> 20, w1 [20]    -> 20, whole run [20,20,20,21] -> 20
//   rank 2: w0 [10]       -> 10, w1 [30,40,50] -> 40, whole run [10,30,40,50] -> 30
TEST(Scores, MatchesHandComputedNvrxScores) {
  RunModel m;
  m.ranks = {rank_with(0, "fwd", {{10, 12, 14}, {10, 10}}), rank_with(1, "fwd", {{20, 20, 21}, {20}}),
             rank_with(2, "fwd", {{10}, {30, 40, 50}})};
  ScoreOptions opt = nvrx();
  opt.window_s = 1;
  ScoreReport rep = compute_scores(m, opt);
  ASSERT_EQ(rep.windows.size(), 2u);

  auto whole = [&](int r) { return rep.ranks[r].sections.at("fwd"); };
  EXPECT_DOUBLE_EQ(whole(0).median_ns, 10);
  EXPECT_DOUBLE_EQ(whole(1).median_ns, 20);
  EXPECT_DOUBLE_EQ(whole(2).median_ns, 30);
  EXPECT_DOUBLE_EQ(*whole(0).relative, 1.0);
  EXPECT_DOUBLE_EQ(*whole(1).relative, 0.5);
  EXPECT_DOUBLE_EQ(*whole(2).relative, 10.0 / 30);
  EXPECT_DOUBLE_EQ(*whole(0).individual, 1.0);
  EXPECT_DOUBLE_EQ(*whole(1).individual, 1.0);
  EXPECT_DOUBLE_EQ(*whole(2).individual, 10.0 / 40);
  EXPECT_EQ(whole(0).count, 5u);

  auto win = [&](int w, int r) { return rep.windows[w].ranks[r].sections.at("fwd"); };
  EXPECT_DOUBLE_EQ(*win(0, 0).relative, 10.0 / 12);
  EXPECT_DOUBLE_EQ(*win(0, 1).relative, 0.5);
  EXPECT_DOUBLE_EQ(*win(0, 2).relative, 1.0);
  EXPECT_DOUBLE_EQ(*win(1, 2).relative, 10.0 / 40);
  EXPECT_DOUBLE_EQ(*win(1, 0).individual, 1.0);   // 10 is its new best
  EXPECT_DOUBLE_EQ(*win(1, 2).individual, 10.0 / 40);

  ASSERT_EQ(rep.stragglers.size(), 3u);
  EXPECT_EQ(rep.stragglers[0].rank, 2);
  EXPECT_EQ(rep.stragglers[0].metric, "individual");
  EXPECT_EQ(rep.stragglers[0].windows, std::vector<int>{1});
  EXPECT_EQ(rep.stragglers[1].rank, 2);
  EXPECT_EQ(rep.stragglers[1].metric, "relative");
  EXPECT_EQ(rep.stragglers[1].windows, std::vector<int>{1});
  EXPECT_EQ(rep.stragglers[2].rank, 1);
  EXPECT_EQ(rep.stragglers[2].metric, "relative");
  EXPECT_EQ(rep.stragglers[2].windows, (std::vector<int>{0, 1}));
  EXPECT_EQ(rep.stragglers[2].scope, "section");
  EXPECT_EQ(rep.stragglers[2].host, "h1");
}

// NVRx flags a rank in each report window in which it is slow. rank 1 is 2x slower in window 1 of 4
// only: its whole-run relative score passes (median 10 vs 10), window 1's (0.5) does not.
TEST(Scores, SlowInOneWindowIsShownPerWindowBesideTheWholeRun) {
  RunModel m;
  m.ranks = {rank_with(0, "fwd", {{10}, {10}, {10}, {10}}), rank_with(1, "fwd", {{10}, {20}, {10}, {10}})};
  ScoreOptions opt;
  opt.window_s = 1;
  opt.min_samples = 1;  // one occurrence per window, as NVRx scores it
  opt.min_share = 0;    // 10 ns in 1 s windows: the share filter has its own test
  ScoreReport rep = compute_scores(m, opt);
  for (const Straggler& s : rep.stragglers) EXPECT_NE(s.metric, "relative");  // whole run: 10 vs 10
  const Straggler* s = nullptr;
  for (const Straggler& w : rep.window_stragglers)
    if (w.metric == "relative") s = &w;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->section, "fwd");
  EXPECT_DOUBLE_EQ(s->score, 0.5);
  EXPECT_EQ(s->windows, std::vector<int>{1});
  // The individual score is already the lowest window's (0.5), so it is a whole-run straggler.
  bool individual = false;
  for (const Straggler& w : rep.stragglers) individual |= w.rank == 1 && w.metric == "individual";
  EXPECT_TRUE(individual);
  EXPECT_EQ(render_json(m, rep)["window_stragglers"].size(), rep.window_stragglers.size());
}

TEST(Scores, ThresholdsAreStrict) {
  RunModel m;
  m.ranks = {rank_with(0, "s", {{3}}), rank_with(1, "s", {{4}})};  // relative 0.75 exactly
  ScoreReport rep = compute_scores(m, nvrx());
  EXPECT_TRUE(rep.stragglers.empty());
  ScoreOptions strict = nvrx();
  strict.relative_threshold = 0.76;
  EXPECT_EQ(compute_scores(m, strict).stragglers.size(), 1u);
}

TEST(Scores, HealthyRunHasNoStragglers) {
  RunModel m;
  for (int r = 0; r < 8; ++r) m.ranks.push_back(rank_with(r, "fwd", {{100 + r, 101, 99}, {100, 102 - r % 2}}));
  EXPECT_TRUE(compute_scores(m, nvrx()).stragglers.empty());
}

TEST(Scores, SectionsWithoutDataHaveNoScoreAndNoNaN) {
  RunModel m;
  m.ranks = {rank_with(0, "fwd", {{10}}), rank_with(1, "bwd", {{0, 0}}), rank_with(2, "bwd", {{5}})};
  m.ranks.push_back(RankData{});  // a rank with no windows at all
  m.ranks.back().rank = 3;
  ScoreReport rep = compute_scores(m, nvrx());
  EXPECT_EQ(rep.ranks[0].sections.count("bwd"), 0u);
  EXPECT_DOUBLE_EQ(*rep.ranks[1].sections.at("bwd").relative, 1.0);  // 0 ns is the best there is
  EXPECT_DOUBLE_EQ(*rep.ranks[2].sections.at("bwd").relative, 0.0);
  EXPECT_TRUE(rep.ranks[3].sections.empty());
  std::string json = render_json(m, rep).dump();
  EXPECT_EQ(json.find("NaN"), std::string::npos);
  EXPECT_EQ(json.find("nan"), std::string::npos);
  EXPECT_EQ(json.find("inf"), std::string::npos);
}

// Issue 10 item 8: 4 samples left after heavy drops made "13201069.25x slower".
TEST(Scores, TooFewSamplesGiveNoScoreAndNoStraggler) {
  RunModel m;
  m.ranks = {rank_with(0, "s", {{10, 10, 10, 10}, {1000, 1000, 1000, 1000, 1000}}),
             rank_with(1, "s", {{1000, 1000, 1000, 1000, 1000}, {1000, 1000, 1000, 1000, 1000}})};
  ScoreReport rep = compute_scores(m, {});  // default: kMinScoreSamples
  EXPECT_TRUE(rep.stragglers.empty());
  // Window 0 of rank 0 has 4 samples: no score, and not the best its window 1 is held to.
  for (const RankScores& r : rep.windows[0].ranks)
    if (r.rank == 0) {
      EXPECT_FALSE(r.sections.at("s").individual.has_value());
    }
  EXPECT_EQ(compute_scores(m, nvrx()).stragglers.size(), 1u);  // NVRx: rank 0 "100x slower than its best"
}

// Issue 30: a rank with data but fewer samples than a score needs is neither "(no data)" in the
// rank table nor the worst rank of the Sections table (which ranked it worst from those samples).
TEST(Scores, TooFewSamplesAreSaidAndRankNobodyWorst) {
  RunModel m;
  m.ranks = {rank_with(0, "s", {{100, 100, 100, 100, 100, 100}}), rank_with(1, "s", {{110, 110, 110, 110, 110, 110}}),
             rank_with(2, "s", {{900, 900, 900}})};
  ScoreReport rep = compute_scores(m, {});  // default: kMinScoreSamples (5)
  ASSERT_EQ(rep.sections.size(), 1u);
  EXPECT_EQ(rep.sections[0].worst_rank, 1);  // was: 2, from its 3 samples
  EXPECT_EQ(rep.sections[0].ranks, 3);       // its median still counts among the medians
  std::ostringstream text;
  render_text(m, rep, text);
  EXPECT_NE(text.str().find("(no section score: fewer than 5 samples)"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("(no data)"), std::string::npos) << text.str();

  m.ranks.pop_back();
  m.ranks[1] = rank_with(1, "s", {{110, 110}});
  ScoreReport few = compute_scores(m, {});  // rank 1 too few; rank 0 the only one scored
  EXPECT_EQ(few.sections[0].worst_rank, 0);
  m.ranks[0] = rank_with(0, "s", {{100, 100}});
  ScoreReport none = compute_scores(m, {});  // nobody has a score
  EXPECT_EQ(none.sections[0].worst_rank, -1);
  std::ostringstream none_text;
  render_text(m, none, none_text);
  EXPECT_NE(none_text.str().find("- (< 5 samples)"), std::string::npos) << none_text.str();
  nlohmann::json j = render_json(m, none);
  EXPECT_TRUE(j["sections"][0]["worst_rank"].is_null()) << j["sections"].dump();
}

TEST(Scores, ReportWindowsAreBoundedOverALongSpan) {
  RunModel m;
  m.ranks = {rank_with(0, "s", {{10, 10, 10, 10, 10}}), rank_with(1, "s", {{10, 10, 10, 10, 10}})};
  m.ranks[1].windows[0].start_ns = 400LL * 86400 * kS;  // a year and more after rank 0
  m.ranks[1].windows[0].end_ns = m.ranks[1].windows[0].start_ns + kS;
  ScoreOptions o;
  o.window_s = 0.25;
  ScoreReport rep = compute_scores(m, o);
  EXPECT_LE(rep.windows.size(), static_cast<size_t>(kMaxReportWindows));
  EXPECT_GT(rep.window_s, 0.25);  // widened, and the report prints the width it used
}

TEST(Scores, EmptyModel) {
  RunModel m;
  ScoreReport rep = compute_scores(m, nvrx());
  EXPECT_TRUE(rep.stragglers.empty());
  EXPECT_EQ(rep.windows.size(), 1u);
}

TEST(Scores, WeightsOfSampledOccurrencesCount) {
  RunModel m;
  m.ranks = {rank_with(0, "s", {{10, 50}}), rank_with(1, "s", {{10}})};
  m.ranks[0].windows[0].sections[0].occurrences[1].weight = 9;  // 50 stands for 9 occurrences
  ScoreReport rep = compute_scores(m, nvrx());
  EXPECT_DOUBLE_EQ(rep.ranks[0].sections.at("s").median_ns, 50);
  EXPECT_DOUBLE_EQ(*rep.ranks[0].sections.at("s").relative, 0.2);
}

TEST(Scores, JsonHasTheDocumentedShape) {
  RunModel m;
  m.run_id = "r";
  m.world_size = 3;
  m.ranks = {rank_with(0, "fwd", {{10}}), rank_with(1, "fwd", {{30}})};
  m.problems.push_back({"missing_rank", 2, "", "rank 2 wrote no readable file"});
  auto j = render_json(m, compute_scores(m, nvrx()));
  ASSERT_EQ(j["ranks"].size(), 2u);
  const auto& s = j["ranks"][1]["sections"]["fwd"];
  EXPECT_EQ(s["count"], 1);
  EXPECT_DOUBLE_EQ(s["median_ms"].get<double>(), 30e-6);
  EXPECT_NEAR(s["relative_score"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(s["individual_score"].get<double>(), 1.0);
  ASSERT_EQ(j["stragglers"].size(), 1u);
  const auto& st = j["stragglers"][0];
  EXPECT_EQ(st["rank"], 1);
  EXPECT_EQ(st["host"], "h1");
  EXPECT_EQ(st["scope"], "section");
  EXPECT_EQ(st["section"], "fwd");
  EXPECT_EQ(st["metric"], "relative");
  EXPECT_EQ(j["problems"][0]["kind"], "missing_rank");
  EXPECT_EQ(j["problems"][0]["rank"], 2);
}

// Issue 9 item 6: one-off 100 ns ranges (seen: warmup_3201, warmup_1472, ...) were listed as
// stragglers. A section must hold a material share of its rank's time to be listed.
TEST(Scores, NoiseSectionIsNotListedButKeepsItsScore) {
  RunModel m;
  m.world_size = 2;
  // "step" fills most of each 1 s window on both ranks, rank 1 20 % slower: listed.
  m.ranks.push_back(rank_with(0, "step", {{300'000'000, 300'000'000}}));
  m.ranks.push_back(rank_with(1, "step", {{480'000'000, 480'000'000}}));
  // A 100 ns warm-up range, 3x slower on rank 1: a low score, but noise.
  for (int r = 0; r < 2; ++r) {
    SectionWindow w;
    w.name = "warmup_3201";
    w.count = 1;
    w.total_ns = r ? 300 : 100;
    w.occurrences.push_back({10, w.total_ns, 1, 1.0});
    m.ranks[r].windows[0].sections.push_back(w);
  }
  ScoreOptions few_samples;  // the share filter under test, not the sample minimum
  few_samples.min_samples = 1;
  ScoreReport rep = compute_scores(m, few_samples);
  ASSERT_EQ(rep.stragglers.size(), 1u);
  EXPECT_EQ(rep.stragglers[0].section, "step");
  EXPECT_EQ(rep.below_min_share, 1);
  const SectionScore& noise = rep.ranks[1].sections.at("warmup_3201");
  ASSERT_TRUE(noise.relative.has_value());
  EXPECT_NEAR(*noise.relative, 1.0 / 3, 1e-9);  // the score stays, in the JSON too
  EXPECT_LT(noise.share, 1e-6);
  EXPECT_NEAR(rep.ranks[1].sections.at("step").share, 0.96, 1e-9);
  auto j = render_json(m, rep);
  EXPECT_EQ(j["stragglers_below_min_share"], 1);
  EXPECT_EQ(j["thresholds"]["min_share"], 0.01);
  EXPECT_TRUE(j["ranks"][1]["sections"]["warmup_3201"].contains("relative_score"));
  ScoreOptions all;
  all.min_share = 0;
  all.min_samples = 1;
  EXPECT_EQ(compute_scores(m, all).stragglers.size(), 2u);
}

}  // namespace
}  // namespace laggard::report
