#include <gtest/gtest.h>

#include <thread>

#include "recorder.h"

namespace laggard {
namespace {

RangeRecord rec(uint32_t name, int64_t start, int64_t end, uint32_t parent = kNoName, uint32_t tid = 1) {
  return RangeRecord{start, end, name, parent, tid, 0, RangeKind::push_pop};
}

TEST(Recorder, AggregatesPerSectionAndParent) {
  NameTable names("", 100);
  uint32_t step = names.intern(nullptr, "", "step")->id;
  uint32_t fwd = names.intern(nullptr, "", "fwd")->id;
  Recorder r(names, 100, 1000, 0);
  ThreadBuffer* t = r.register_thread(9);
  t->add(rec(fwd, 10, 40, step));   // 30
  t->add(rec(fwd, 50, 60, step));   // 10
  t->add(rec(fwd, 70, 90, step));   // 20
  t->add(rec(step, 0, 100));
  WindowSnapshot w = r.close_window(200, {});
  EXPECT_EQ(w.index, 0u);
  EXPECT_EQ(w.start_ns, 1000);
  EXPECT_EQ(w.end_ns, 1200);
  ASSERT_EQ(w.sections.size(), 2u);
  const SectionWindowStats& f = w.sections[0].name == "fwd" ? w.sections[0] : w.sections[1];
  EXPECT_EQ(f.parent, "step");
  EXPECT_EQ(f.count, 3u);
  EXPECT_EQ(f.total_ns, 60);
  EXPECT_EQ(f.min_ns, 10);
  EXPECT_EQ(f.max_ns, 30);
  EXPECT_EQ(f.median_ns, 20);
  EXPECT_EQ(f.start_ns, (std::vector<int64_t>{1010, 1050, 1070}));  // epoch = mono + offset
  EXPECT_EQ(f.tid, (std::vector<uint32_t>{1, 1, 1}));
  EXPECT_TRUE(r.has_data());

  WindowSnapshot next = r.close_window(300, {});
  EXPECT_EQ(next.index, 1u);
  EXPECT_EQ(next.start_ns, 1200);
  EXPECT_TRUE(next.sections.empty());
}

TEST(Recorder, EvenCountMedianIsMidpoint) {
  NameTable names("", 10);
  uint32_t a = names.intern(nullptr, "", "a")->id;
  Recorder r(names, 100, 0, 0);
  ThreadBuffer* t = r.register_thread(1);
  for (int64_t d : {10, 40, 20, 30}) t->add(rec(a, 0, d));
  EXPECT_EQ(r.close_window(1, {}).sections.at(0).median_ns, 25);
}

TEST(Recorder, SamplingKeepsStatsExactAndCountsDrops) {
  NameTable names("", 10);
  uint32_t a = names.intern(nullptr, "", "a")->id;
  Recorder r(names, 50, 0, 0);
  ThreadBuffer* t = r.register_thread(1);
  int64_t total = 0;
  for (int i = 1; i <= 1000; ++i) {
    t->add(rec(a, i * 10, i * 10 + i));
    total += i;
    if (i % 500 == 0) r.drain();  // the ring holds 4096; drain as the flush thread would
  }
  WindowSnapshot w = r.close_window(100000, {});
  const SectionWindowStats& s = w.sections.at(0);
  EXPECT_EQ(s.count, 1000u);
  EXPECT_EQ(s.total_ns, total);
  EXPECT_EQ(s.min_ns, 1);
  EXPECT_EQ(s.max_ns, 1000);
  EXPECT_EQ(s.dur_ns.size(), 50u);
  EXPECT_EQ(w.dropped.occurrences_sampled, 950u);
  // A uniform sample of 1..1000: its median is near 500.
  EXPECT_GT(s.median_ns, 250);
  EXPECT_LT(s.median_ns, 750);
}

TEST(Recorder, FullRingCountsDropsPerWindow) {
  NameTable names("", 10);
  uint32_t a = names.intern(nullptr, "", "a")->id;
  Recorder r(names, 10, 0, 0);
  ThreadBuffer* t = r.register_thread(1);
  const size_t cap = decltype(t->ranges)::capacity();
  for (size_t i = 0; i < cap + 7; ++i) t->add(rec(a, 0, 1));
  WindowSnapshot w = r.close_window(10, {});
  EXPECT_EQ(w.dropped.ring_full, 7u);
  EXPECT_EQ(w.sections.at(0).count, cap);
  EXPECT_EQ(r.close_window(20, {}).dropped.ring_full, 0u);  // a delta, not a total
}

TEST(Recorder, ExitedThreadIsDrainedThenFreed) {
  NameTable names("", 10);
  uint32_t a = names.intern(nullptr, "", "a")->id;
  Recorder r(names, 10, 0, 0);
  std::thread([&] {
    ThreadBuffer* t = r.register_thread(5);
    t->add(rec(a, 0, 3, kNoName, 5));
    t->open_depth.store(2);
    t->exited.store(true);
  }).join();
  EXPECT_EQ(r.open_ranges(), 2u);
  WindowSnapshot w = r.close_window(10, {});
  EXPECT_EQ(w.sections.at(0).count, 1u);
  EXPECT_EQ(w.dropped.unclosed_at_exit, 2u);  // its two open ranges can never close
  EXPECT_EQ(r.open_ranges(), 0u);  // freed after its last drain
}

TEST(Recorder, ExtraCountersAreAddedToTheWindow) {
  NameTable names("", 10);
  Recorder r(names, 10, 0, 0);
  DropCounters extra;
  extra.start_end_evicted = 3;
  extra.names_overflow = 4;
  WindowSnapshot w = r.close_window(10, extra);
  EXPECT_EQ(w.dropped.start_end_evicted, 3u);
  EXPECT_EQ(w.dropped.names_overflow, 4u);
  EXPECT_FALSE(r.has_data());
}

}  // namespace
}  // namespace laggard

namespace laggard {
namespace {

TEST(Recorder, WindowBudgetIsSharedAcrossSections) {
  NameTable names("", 100);
  uint32_t small = names.intern(nullptr, "", "small")->id;
  uint32_t big1 = names.intern(nullptr, "", "big1")->id;
  uint32_t big2 = names.intern(nullptr, "", "big2")->id;
  Recorder r(names, 1000, 0, 0, /*window_budget=*/100);
  ThreadBuffer* t = r.register_thread(1);
  for (int i = 0; i < 10; ++i) t->add(rec(small, i, i + 1));
  for (int i = 0; i < 500; ++i) {
    t->add(rec(big1, i, i + 2));
    t->add(rec(big2, i, i + 3));
  }
  WindowSnapshot w = r.close_window(1000, {});
  std::map<std::string, const SectionWindowStats*> by;
  for (const auto& s : w.sections) by[s.name] = &s;
  EXPECT_EQ(by["small"]->dur_ns.size(), 10u);  // under its fair share: untouched
  EXPECT_EQ(by["big1"]->dur_ns.size(), 45u);   // (100 - 10) / 2
  EXPECT_EQ(by["big2"]->dur_ns.size(), 45u);
  EXPECT_EQ(by["big1"]->count, 500u);          // stats stay exact
  EXPECT_EQ(w.dropped.occurrences_sampled, 2u * (500 - 45));
  // Sorted by start time after subsampling.
  EXPECT_TRUE(std::is_sorted(by["big1"]->start_ns.begin(), by["big1"]->start_ns.end()));
}

}  // namespace
}  // namespace laggard
