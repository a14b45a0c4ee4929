// nvtxRangeStart/End bookkeeping under many threads (issue 24, item 12): a range is evicted only
// when the table is really full, never because another thread's id landed on its slot.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "name_table.h"
#include "start_end_table.h"

namespace laggard {
namespace start_end_table_test {

TEST(StartEndTable, SixteenThreadsWithAtMostSixteenOpenRangesEvictNothing) {
  NameTable names("", 16);
  const NameEntry* epoch = names.intern(nullptr, "", "epoch");
  const NameEntry* io = names.intern(nullptr, "", "io");
  StartEndTable table;  // the library's size: 16384 slots
  // Thread 0 keeps one range open throughout (an epoch on a loader thread); 15 threads start and
  // end ranges one at a time: never more than 16 open. Each thread takes ids in blocks of 256
  // (nvtx_callbacks.cpp), so after 64 blocks one of them got the id 16384 above the epoch's and
  // evicted it: "start_end_evicted" and an unmatched end for a range that was never lost.
  IdBlock epoch_block;
  uint64_t epoch_id = table.start(epoch, 0, 0, &epoch_block);
  std::atomic<uint64_t> ended{0};
  std::vector<std::thread> threads;
  for (uint32_t k = 1; k < 16; ++k)
    threads.emplace_back([&, k] {
      IdBlock block;
      for (int i = 0; i < 4000; ++i) {
        uint64_t id = table.start(io, i, k, &block);
        RangeRecord r{};
        bool emit = false;
        if (table.end(id, i + 1, &r, &emit)) ended.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  RangeRecord r{};
  bool emit = false;
  EXPECT_TRUE(table.end(epoch_id, 1'000'000, &r, &emit));
  EXPECT_EQ(table.evicted(), 0u);
  EXPECT_EQ(ended.load(), 15u * 4000u);
  EXPECT_EQ(table.open_count(), 0u);
}

TEST(StartEndTable, ALongOpenRangeSurvivesMillionsOfOthers) {
  NameTable names("", 16);
  const NameEntry* epoch = names.intern(nullptr, "", "epoch");
  const NameEntry* step = names.intern(nullptr, "", "step");
  StartEndTable table(1024);
  uint64_t long_id = table.start(epoch, 0, 1);
  IdBlock block;
  for (int i = 0; i < 100000; ++i) {
    RangeRecord r{};
    bool emit = false;
    ASSERT_TRUE(table.end(table.start(step, i, 2, &block), i + 1, &r, &emit));
  }
  RangeRecord r{};
  bool emit = false;
  EXPECT_TRUE(table.end(long_id, 200000, &r, &emit));
  EXPECT_TRUE(emit);
  EXPECT_EQ(r.start_ns, 0);
  EXPECT_EQ(table.evicted(), 0u);
}

}  // namespace start_end_table_test
}  // namespace laggard
