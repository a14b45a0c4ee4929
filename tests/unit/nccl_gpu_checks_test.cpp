// The reader's checks of NCCL's GPU timestamps (report/analyze/nccl_gpu_checks.h), modelled on NCCL's
// profiler proxy (src/transport/profiler.cc, v2.27.3-v2.30.7): a 64-entry timestamp ring per
// channel, read by the proxy thread before it calls the plugin.
#include <gtest/gtest.h>

#include "nccl_gpu_checks.h"

#include <algorithm>
#include <random>
#include <set>

namespace laggard::report {
namespace nccl_gpu_checks_test {

constexpr int64_t kT0 = 1'800'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000, kUs = 1'000;

// n AllReduces of one communicator, one every 2 ms, each 300 us on the GPU; the proxy calls
// back 20-40 us after each timestamp; the GPU clock reads gpu_offset ahead of the host's.
RankData rank_with_ops(int n, int64_t gpu_offset = 0) {
  RankData r;
  r.rank = 3;
  CaptureWindow w;
  for (int i = 0; i < n; ++i) {
    Collective c;
    c.comm = 1;
    c.func = 2;
    c.seq = static_cast<uint64_t>(i);
    c.nchannels = 2;
    c.channels = 2;
    int64_t start = kT0 + i * 2 * kMs;
    c.upload_start_ns = start - 10 * kUs;
    c.upload_end_ns = start - 5 * kUs;
    c.gpu_start_ns = start + gpu_offset;
    c.gpu_end_ns = start + 300 * kUs + gpu_offset;
    c.chan_host_start_ns = start + 20 * kUs + (i % 3) * 10 * kUs;
    c.chan_host_stop_ns = start + 320 * kUs + (i % 2) * 10 * kUs;
    w.collectives.push_back(c);
  }
  r.windows.push_back(w);
  return r;
}

std::vector<const char*> suspects(const RankData& r) {
  std::vector<const char*> out;
  for (const Collective& c : r.windows[0].collectives) out.push_back(c.gpu_time_suspect);
  return out;
}

TEST(NcclGpuChecks, HealthyOpsAreNotFlagged) {
  RankData r = rank_with_ops(100, 3 * kMs);
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  for (const char* s : suspects(r)) EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(problems.empty());
}

// The proxy read a later work's slot (the ring wrapped, or graph replays shifted the counter):
// the GPU times are later than the callback that reported them.
TEST(NcclGpuChecks, GpuTimeAfterItsCallbackIsFlagged) {
  RankData r = rank_with_ops(100);
  Collective& c = r.windows[0].collectives[40];
  c.gpu_start_ns += 4 * kMs;  // op 42's times
  c.gpu_end_ns += 4 * kMs;
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  auto s = suspects(r);
  EXPECT_STREQ(s[40], "after_callback");
  for (int i = 0; i < 100; ++i)
    if (i != 40) {
      EXPECT_EQ(s[i], nullptr) << i;
    }
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, "nccl_gpu_time_suspect");
  EXPECT_NE(problems[0].message.find("1 after_callback"), std::string::npos) << problems[0].message;
}

// A proxy thread starved of CPU (a loaded host, issue 27): most callbacks come 3-6 ms after the
// GPU wrote the stamp, a prompt one (20 us) only every 40 ops. A prompt read is the op's own time,
// not a later work's: not flagged. A later work's time (two ops on, 4 ms) still is.
TEST(NcclGpuChecks, PromptReadsOfAStarvedProxyAreNotFlagged) {
  RankData r = rank_with_ops(400);
  auto& ops = r.windows[0].collectives;
  for (int i = 0; i < 400; ++i) {
    const int64_t lag = i % 40 == 7 ? 20 * kUs : (3 + (i * 7) % 4) * kMs;
    ops[i].chan_host_start_ns = ops[i].gpu_start_ns + lag;
    ops[i].chan_host_stop_ns = ops[i].gpu_end_ns + lag;
  }
  ops[200].gpu_start_ns += 6 * kMs + 4 * kMs;  // a work three ops on, read before the proxy caught up
  ops[200].gpu_end_ns += 6 * kMs + 4 * kMs;
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  auto s = suspects(r);
  EXPECT_STREQ(s[200], "after_callback");
  for (int i = 0; i < 400; ++i)
    if (i != 200 && i != 199 && i != 201) {  // its neighbours overlap it: out_of_order, fair
      EXPECT_EQ(s[i], nullptr) << i;
    }
}

// An earlier work's timestamps (graph replay counters): the op overlaps its predecessor on the
// communicator's stream; both are left out.
TEST(NcclGpuChecks, StaleTimestampOverlapsItsPredecessor) {
  RankData r = rank_with_ops(50);
  auto& ops = r.windows[0].collectives;
  ops[20].gpu_start_ns = ops[19].gpu_start_ns;
  ops[20].gpu_end_ns = ops[19].gpu_end_ns;
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  auto s = suspects(r);
  EXPECT_STREQ(s[19], "out_of_order");
  EXPECT_STREQ(s[20], "out_of_order");
  EXPECT_EQ(s[18], nullptr);
  EXPECT_EQ(s[21], nullptr);
}

TEST(NcclGpuChecks, PartialOpsAreFlagged) {
  RankData r = rank_with_ops(10);
  r.windows[0].collectives[4].channels = 1;
  r.windows[0].collectives[5].channels = -1;  // not recorded (old file): no judgement
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  auto s = suspects(r);
  EXPECT_STREQ(s[4], "partial");
  EXPECT_EQ(s[5], nullptr);
}

// One shift per GPU, from the callbacks when there are any (issue 11 item 9).
TEST(NcclGpuChecks, FarGpuClockIsShiftedPerGpuByItsCallbacks) {
  RankData r = rank_with_ops(20, -3600'000 * kMs);  // an hour behind: not epoch-based
  std::vector<Problem> problems;
  shift_far_gpu_clock(r, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, "nccl_gpu_clock");
  // Each op's end now lies at or before its stop callback, the tightest exactly on it (20 us lag).
  EXPECT_EQ(r.nccl_gpu_shift_ns, 3600'000 * kMs + 20 * kUs);
  for (const Collective& c : r.windows[0].collectives) EXPECT_LE(c.gpu_end_ns, c.chan_host_stop_ns);
  // Close clocks are left alone.
  RankData close = rank_with_ops(20, 5 * kMs);
  problems.clear();
  shift_far_gpu_clock(close, problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(close.nccl_gpu_shift_ns, 0);
}

TEST(NcclGpuChecks, KernelEventsOffAndPluginNeverInitializedAreSaid) {
  RankData r;
  r.rank = 0;
  r.nccl_status = "on";
  CaptureWindow w;
  KernelWindowStats k;
  k.nccl = true;
  w.kernel_stats.push_back(k);
  r.windows.push_back(w);
  std::vector<Problem> problems;
  check_nccl_plugin(r, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, "nccl_plugin_not_loaded");
  r.windows[0].nccl_table = 4;
  r.windows[0].nccl_kernel_events = "off: NCCL 2.27 (v4 table) ...";
  problems.clear();
  check_nccl_plugin(r, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, "nccl_kernel_events_off");
}

// Issue 27: collectives of one plan (ncclGroupStart/End) run in one kernel, and each channel's
// batch stamps all its works alike (device/common.h profiler()): their GPU times overlap, and
// that is no sign of other work's timestamps. Two plans overlapping still is.
TEST(NcclGpuChecks, OpsOfOnePlanOverlapWithoutSuspicion) {
  RankData r = rank_with_ops(100);
  auto& ops = r.windows[0].collectives;
  for (size_t i = 0; i < ops.size(); i += 2) {  // pairs: the second starts with the first
    ops[i + 1].gpu_start_ns = ops[i].gpu_start_ns + 200;
    ops[i + 1].gpu_end_ns = ops[i].gpu_end_ns - 200;
    ops[i + 1].upload_start_ns = ops[i].upload_start_ns + 2 * kUs;
    ops[i + 1].chan_host_start_ns = ops[i].chan_host_start_ns;
    ops[i + 1].chan_host_stop_ns = ops[i].chan_host_stop_ns;
    ops[i].group = ops[i + 1].group = i / 2 + 1;
  }
  std::vector<Problem> problems;
  RankData grouped = r;
  flag_implausible_gpu_times(grouped, problems);
  for (const char* s : suspects(grouped)) EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(problems.empty());
  // Without plan numbers (files before issue 27) they look like other work's stamps.
  for (Collective& c : r.windows[0].collectives) c.group = 0;
  flag_implausible_gpu_times(r, problems);
  EXPECT_STREQ(suspects(r)[1], "out_of_order");
}

TEST(NcclGpuChecks, ShiftedOpsAreSuspect) {
  RankData r = rank_with_ops(40);
  r.windows[0].collectives[30].gpu_shifted = true;
  std::vector<Problem> problems;
  flag_implausible_gpu_times(r, problems);
  EXPECT_STREQ(suspects(r)[30], "shifted");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("1 shifted"), std::string::npos) << problems[0].message;
}

// A process driving several GPUs: each GPU's clock and proxy lag on their own.
TEST(NcclGpuChecks, EachGpuOfAProcessIsCheckedOnItsOwn) {
  RankData r = rank_with_ops(40);
  RankData far = rank_with_ops(40, -1'700'000'000 * int64_t{1'000'000'000});  // a clock not epoch-based
  for (Collective c : far.windows[0].collectives) {
    c.device = 1;
    r.windows[0].collectives.push_back(c);
  }
  for (Collective& c : r.windows[0].collectives)
    if (c.device < 0) c.device = 0;
  std::vector<Problem> problems;
  shift_far_gpu_clock(r, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("(GPU 1)"), std::string::npos) << problems[0].message;
  const auto& ops = r.windows[0].collectives;
  EXPECT_EQ(ops[0].gpu_start_ns, kT0);      // GPU 0 untouched
  EXPECT_NEAR(double(ops[40].gpu_end_ns), double(ops[40].chan_host_stop_ns), double(40 * kUs));  // GPU 1 shifted
  flag_implausible_gpu_times(r, problems);
  for (const char* s : suspects(r)) EXPECT_EQ(s, nullptr);  // the two GPUs' ops overlap, on two GPUs
}

// The after-callback windows as the code before issue 29 kept them, a std::multiset each: the
// reference the segment tree (SecondSmallest) must agree with, flag for flag.
void reference_after_callback(std::vector<Collective*> ops, bool stop, const NcclGpuCheckOptions& o) {
  auto host_of = [&](const Collective& c) { return stop ? c.chan_host_stop_ns : c.chan_host_start_ns; };
  auto gpu_of = [&](const Collective& c) { return stop ? c.gpu_end_ns : c.gpu_start_ns; };
  ops.erase(std::remove_if(ops.begin(), ops.end(), [&](Collective* c) { return !host_of(*c); }), ops.end());
  std::sort(ops.begin(), ops.end(), [&](Collective* a, Collective* b) { return host_of(*a) < host_of(*b); });
  const size_t n = ops.size();
  std::vector<int64_t> delay(n), host(n);
  for (size_t i = 0; i < n; ++i) {
    host[i] = host_of(*ops[i]);
    delay[i] = host[i] - gpu_of(*ops[i]);
  }
  std::vector<int64_t> sorted = delay;
  std::sort(sorted.begin(), sorted.end());
  const double tolerance = std::max<double>(
      double(o.callback_tolerance_ns), n ? double(sorted[n / 2] - sorted[std::min<size_t>(1, n - 1)]) : 0.0);
  const size_t k = static_cast<size_t>(std::max(1, o.neighbours));
  std::multiset<int64_t> before, after;
  size_t lo = 0, hi = 0, time_lo = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i) before.insert(delay[i - 1]);
    while (time_lo < i && host[time_lo] < host[i] - o.baseline_window_ns) ++time_lo;
    for (const size_t new_lo = std::min(i > k ? i - k : 0, time_lo); lo < new_lo; ++lo) before.erase(before.find(delay[lo]));
    if (i < hi) after.erase(after.find(delay[i]));
    hi = std::max(hi, i + 1);
    while (hi < n && (hi <= i + k || host[hi] <= host[i] + o.baseline_window_ns)) after.insert(delay[hi++]);
    if (before.size() < 4 || after.size() < 4 || ops[i]->gpu_time_suspect) continue;
    if (delay[i] < *std::next(before.begin()) - tolerance && delay[i] < *std::next(after.begin()) - tolerance)
      ops[i]->gpu_time_suspect = "after_callback";
  }
}

// Random proxies (prompt, starved, with ties and later works' times, some callbacks unknown) and
// windows from one op to all of them: the same ops flagged as by the multisets.
TEST(NcclGpuChecks, AfterCallbackWindowsFlagWhatMultisetsFlagged) {
  std::mt19937_64 rng(29);
  int flagged = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = static_cast<int>(rng() % 300);
    NcclGpuCheckOptions o;
    o.neighbours = std::array{1, 2, 4, 7, 32}[rng() % 5];
    o.baseline_window_ns = std::array<int64_t, 4>{0, 3 * kMs, 40 * kMs, 5'000'000'000}[rng() % 4];
    o.callback_tolerance_ns = std::array<int64_t, 3>{0, 50 * kUs, 500 * kUs}[rng() % 3];
    std::vector<Collective> mine(n), theirs;
    for (int i = 0; i < n; ++i) {
      Collective& c = mine[i];
      c.comm = static_cast<uint32_t>(i);  // one op per communicator: nothing out of order
      c.nchannels = c.channels = 2;
      c.upload_start_ns = kT0 + i * 2 * kMs;
      c.gpu_start_ns = c.upload_start_ns + 10 * kUs;
      c.gpu_end_ns = c.gpu_start_ns + 300 * kUs;
      const int64_t lag = rng() % 4 == 0 ? int64_t(rng() % 5) * kMs : int64_t(rng() % 3) * 10 * kUs;  // ties
      c.chan_host_start_ns = rng() % 20 == 0 ? 0 : c.gpu_start_ns + lag;
      c.chan_host_stop_ns = rng() % 20 == 0 ? 0 : c.gpu_end_ns + lag;
      if (rng() % 15 == 0) {  // a later work's times
        c.gpu_start_ns += int64_t(1 + rng() % 3) * 2 * kMs;
        c.gpu_end_ns += int64_t(1 + rng() % 3) * 2 * kMs;
      }
    }
    theirs = mine;
    std::vector<Collective*> a, b;
    for (Collective& c : mine) a.push_back(&c);
    for (Collective& c : theirs) b.push_back(&c);
    flag_implausible_gpu_times(a, o);
    reference_after_callback(b, true, o);
    reference_after_callback(b, false, o);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(mine[i].gpu_time_suspect == nullptr, theirs[i].gpu_time_suspect == nullptr)
          << "trial " << trial << " op " << i << " of " << n;
      flagged += mine[i].gpu_time_suspect != nullptr;
    }
  }
  EXPECT_GT(flagged, 100);  // the trials do flag (else they compare nothing)
}

}  // namespace
}  // namespace laggard::report
