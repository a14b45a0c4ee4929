// What the NCCL source tells the hang watchdog: collectives in flight (also one given up on after
// the stuck timeout), the last started and completed one, and that collective events count as
// progress.
#include <gtest/gtest.h>

#include "clock.h"
#include "profiler.h"

namespace laggard::nccl {
namespace nccl_watch_test {

constexpr int64_t kSec = 1'000'000'000;

CollInfo allreduce(uint64_t seq) {
  CollInfo c;
  c.seq = seq;
  c.func = "AllReduce";
  c.datatype = "ncclFloat32";
  c.nchannels = 1;
  return c;
}

void complete(Profiler& p, void* ctx, uint64_t seq) {
  void* op = p.start_coll(ctx, allreduce(seq));
  p.stop(op);
  void* k = p.start_kernel_ch(op, 0, 1000);
  p.record_kernel_ch_stop(k, 2000);
  p.stop(k);
}

TEST(NcclWatch, InFlightLastStartedAndLastCompleted) {
  Profiler p({}, 0);
  void* ctx = p.add_comm(0xaa, "world", 1, 4, 2);
  uint64_t before = p.progress();
  complete(p, ctx, 1411);
  EXPECT_EQ(p.progress(), before);  // nothing is counted on NCCL's threads (issue 29)
  p.harvest(mono_ns(), false);
  EXPECT_GT(p.progress(), before);  // the harvest saw it start and finish
  void* stuck = p.start_coll(ctx, allreduce(1412));
  p.stop(stuck);
  void* k = p.start_kernel_ch(stuck, 0, 3000);  // the GPU started it, it never finishes
  (void)k;
  CollectiveProgress c = p.describe();
  EXPECT_TRUE(c.active);
  ASSERT_EQ(c.in_flight.size(), 1u);
  EXPECT_EQ(c.in_flight[0].func, "AllReduce");
  EXPECT_EQ(c.in_flight[0].seq, 1412u);
  EXPECT_EQ(c.in_flight[0].comm_hash, 0xaau);
  EXPECT_EQ(c.in_flight[0].comm_name, "world");
  EXPECT_TRUE(c.in_flight[0].host_stopped);
  EXPECT_EQ(c.in_flight[0].channels_started, 1);
  EXPECT_EQ(c.in_flight[0].channels_stopped, 0);
  ASSERT_TRUE(c.last_started && c.last_completed);
  EXPECT_EQ(c.last_started->seq, 1412u);
  EXPECT_EQ(c.last_completed->seq, 1411u);

  // After the stuck timeout the op leaves the pool, but it is still what the rank waits for.
  p.harvest(mono_ns(), false);               // the flush thread sees it stuck from here
  p.harvest(mono_ns() + 200 * kSec, false);
  c = p.describe();
  ASSERT_EQ(c.in_flight.size(), 1u);
  EXPECT_EQ(c.in_flight[0].seq, 1412u);
  EXPECT_EQ(c.in_flight[0].channels_started, -1);
  EXPECT_EQ(c.last_started->seq, 1412u);

  // A later completion on the communicator supersedes it.
  complete(p, ctx, 1413);
  p.harvest(mono_ns(), false);
  c = p.describe();
  EXPECT_TRUE(c.in_flight.empty());
  EXPECT_EQ(c.last_completed->seq, 1413u);
}

}  // namespace
}  // namespace laggard::nccl
