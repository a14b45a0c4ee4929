// Cross-rank NCCL analysis on synthetic runs: who arrived last, who waited, blame, clock
// alignment across hosts, bandwidth and slow collectives.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "comm_analysis.h"

namespace laggard::report {
namespace comm_analysis_test {

constexpr int64_t kT0 = 1'800'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000, kUs = 1'000;

struct Scenario {
  int nranks = 4;
  int ncoll = 100;
  int late_rank = 2;           // -1: nobody
  int64_t late_by = 5 * kMs;
  double late_share = 0.9;     // of the collectives
  int64_t jitter = 5 * kUs;    // arrival noise of everybody
  std::vector<std::string> hosts = {"a", "a", "b", "b"};
  std::vector<int64_t> host_clock_shift = {0, 0, 0, 0};  // per rank, added to its GPU times
  std::vector<double> drift_ppm = {0, 0, 0, 0};          // per rank: its GPU clock's rate error
  int64_t transfer = 200 * kUs;
  uint64_t bytes = 4 << 20;
  std::vector<int> slow_seqs;  // collectives whose transfer takes 10x longer
  int missing_rank_seq = -1;   // this collective is missing on rank 0
  // Issue 27.
  int group = 1;               // collectives per step in one NCCL plan (one kernel): their GPU times overlap
  int late_end_rank = -1;      // this rank's kernels end late_end after the others' (a slow GPU)
  int64_t late_end = 0;
  bool callbacks = false;      // NCCL's proxy callbacks, on the host clock, 20-30 us after each GPU stop
  int starved_proxy_rank = -1; // this rank's proxy thread is starved of CPU: its callbacks come
                               // 0.3-3 ms late, promptly (20 us) only one collective in 20
};

RunModel build(const Scenario& sc) {
  RunModel m;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> jit(0, sc.jitter);
  std::uniform_real_distribution<double> u(0, 1);
  uint32_t comm = m.strings.intern("00000000c0ffee00");
  uint32_t name = m.strings.intern("world");
  uint32_t func = m.strings.intern("AllReduce");
  uint32_t dtype = m.strings.intern("ncclFloat32");
  for (int r = 0; r < sc.nranks; ++r) {
    RankData rd;
    rd.rank = r;
    rd.host = sc.hosts[r];
    rd.world_size = sc.nranks;
    CaptureWindow w;
    w.start_ns = kT0;
    w.end_ns = kT0 + int64_t(sc.ncoll + 1) * 20 * kMs;
    rd.windows.push_back(w);
    m.ranks.push_back(rd);
  }
  m.world_size = sc.nranks;
  std::map<std::string, uint64_t> seq;
  for (int i = 0; i < sc.ncoll; ++i) {
    int64_t base = kT0 + int64_t(i) * 20 * kMs;
    std::vector<int64_t> arrive(sc.nranks);
    for (int r = 0; r < sc.nranks; ++r) arrive[r] = base + jit(rng);
    if (sc.late_rank >= 0 && u(rng) < sc.late_share) arrive[sc.late_rank] += sc.late_by;
    int64_t last = *std::max_element(arrive.begin(), arrive.end());
    int64_t transfer = std::count(sc.slow_seqs.begin(), sc.slow_seqs.end(), i) ? 10 * sc.transfer : sc.transfer;
    std::vector<int64_t> end(sc.nranks);
    for (int r = 0; r < sc.nranks; ++r) end[r] = last + transfer + jit(rng) / 5 + (r == sc.late_end_rank ? sc.late_end : 0);
    for (int k = 0; k < sc.group; ++k) {
      const char* fn = sc.group == 1 ? "AllReduce" : k % 2 ? "AllGather" : "ReduceScatter";
      const uint64_t s = seq[fn]++;
      for (int r = 0; r < sc.nranks; ++r) {
        if (i == sc.missing_rank_seq && r == 0) continue;
        Collective c;
        c.comm = comm;
        c.comm_name = name;
        c.comm_nranks = sc.nranks;
        c.comm_rank = r;
        c.func = sc.group == 1 ? func : m.strings.intern(fn);
        c.datatype = dtype;
        c.seq = s;
        c.group = sc.group > 1 ? uint64_t(i + 1) : 0;
        c.bytes = sc.bytes;
        c.count = sc.bytes / 4;
        c.upload_start_ns = arrive[r] - 30 * kUs;
        c.upload_end_ns = c.upload_start_ns + 10 * kUs;
        auto drift = [&](int64_t t) { return std::llround(double(t - kT0) * sc.drift_ppm[r] * 1e-6); };
        // One kernel: the group's ops start together and end together (a few ns apart).
        const int64_t start = arrive[r] + k * 200, stop = end[r] - k * 200;
        c.gpu_start_ns = start + sc.host_clock_shift[r] + drift(start);
        c.gpu_end_ns = stop + sc.host_clock_shift[r] + drift(stop);
        if (sc.callbacks) {  // on the host clock, after the GPU wrote the stamp
          c.chan_host_start_ns = start + 20 * kUs + jit(rng) * 2;
          c.chan_host_stop_ns = stop + 20 * kUs + jit(rng) * 2;
        }
        if (sc.callbacks && r == sc.starved_proxy_rank && i % 20 != 3) {
          c.chan_host_start_ns += 300 * kUs + int64_t(u(rng) * 2700 * kUs);
          c.chan_host_stop_ns += 300 * kUs + int64_t(u(rng) * 2700 * kUs);
        }
        m.ranks[r].windows[0].collectives.push_back(c);
      }
    }
  }
  return m;
}

CommReport analyze(const RunModel& m) {
  ScoreOptions so;
  so.window_s = 0.5;
  return analyze_collectives(m, compute_scores(m, so));
}

std::vector<int> comm_straggler_ranks(const CommReport& rep) {
  std::vector<int> out;
  for (const Straggler& s : rep.stragglers) {
    EXPECT_EQ(s.scope, "comm");
    EXPECT_EQ(s.metric, "last_arrival");
    EXPECT_LT(s.score, s.threshold);
    out.push_back(s.rank);
  }
  return out;
}

TEST(CommAnalysis, LateRankIsBlamedAndTheOthersWaited) {
  Scenario sc;
  RunModel m = build(sc);
  CommReport rep = analyze(m);
  EXPECT_EQ(rep.matched, 100u);
  EXPECT_EQ(rep.incomplete, 0u);
  ASSERT_EQ(rep.ranks.size(), 4u);
  const CommRankStats& late = rep.ranks[2];
  EXPECT_GE(late.last, 85u);
  EXPECT_LE(late.last, 95u);
  // Three ranks wait ~5 ms in each late collective; all of it is rank 2's doing.
  EXPECT_NEAR(late.blame_ns, 3.0 * 5 * kMs * late.last, 3.0 * 100 * 10 * kUs);
  EXPECT_LT(late.waited_ns, 100.0 * 10 * kUs);
  for (int r : {0, 1, 3}) {
    EXPECT_GT(rep.ranks[r].waited_ns, 0.8 * 5 * kMs * late.last) << r;
    EXPECT_LT(rep.ranks[r].blame_ns, 0.01 * late.blame_ns) << r;
    EXPECT_LT(rep.ranks[r].last, 10u) << r;
  }
  EXPECT_EQ(comm_straggler_ranks(rep), std::vector<int>{2});
  ASSERT_EQ(rep.stragglers.size(), 1u);
  EXPECT_EQ(rep.stragglers[0].section, "comm world");
  EXPECT_NEAR(rep.stragglers[0].score, 1 - double(late.last) / 100, 1e-9);
  EXPECT_DOUBLE_EQ(rep.stragglers[0].threshold, 1 - 0.625);  // 4 ranks: halfway between 1/4 and 1
  EXPECT_FALSE(rep.stragglers[0].windows.empty());
  ASSERT_EQ(rep.comms.size(), 1u);
  EXPECT_EQ(rep.comms[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  // The collectives with the most waiting, in full: rank 2 came ~5 ms after the others.
  ASSERT_EQ(rep.worst.size(), 10u);
  const CollectiveDetail& d = rep.worst[0];
  EXPECT_EQ(d.last_ranks, std::vector<int>{2});
  EXPECT_EQ(d.ranks, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(d.arrival_ns.size(), 4u);
  EXPECT_NEAR(d.arrival_ns[2], 5.0 * kMs, 10 * kUs);
  EXPECT_EQ(d.wait_ns[2], 0);
  for (int r : {0, 1, 3}) EXPECT_NEAR(d.wait_ns[r], 5.0 * kMs, 10 * kUs);
  EXPECT_GE(d.total_wait_ns, rep.worst[9].total_wait_ns);
  EXPECT_NEAR(d.busbw_gbps, double(4 << 20) / (200.0 * kUs) * 1.5, 0.05 * double(4 << 20) / (200.0 * kUs));
  EXPECT_FALSE(rep.clock.corrected && rep.clock.max_abs_offset_ns > 50 * kUs);
}

TEST(CommAnalysis, ShiftedHostClocksGiveTheSameVerdictAfterAlignment) {
  Scenario sc;
  RunModel plain = build(sc);
  // Host b's clock runs 8 ms behind: uncorrected, rank 2 would look 3 ms early and host a's
  // ranks late.
  sc.host_clock_shift = {0, 0, -8 * kMs, -8 * kMs};
  RunModel shifted = build(sc);
  CommReport a = analyze(plain), b = analyze(shifted);
  EXPECT_TRUE(b.clock.corrected);
  EXPECT_NEAR(b.clock.max_abs_offset_ns, 8.0 * kMs, 20 * kUs);
  ASSERT_EQ(b.clock.hosts.size(), 2u);
  EXPECT_NEAR(b.clock.hosts[1].offset_ns, -8.0 * kMs, 20 * kUs);
  EXPECT_NEAR(b.clock.hosts[0].offset_ns, 0, 20 * kUs);
  EXPECT_EQ(b.clock.reference_rank, 0);
  EXPECT_LT(b.clock.residual_ns, 10 * kUs);
  EXPECT_NEAR(b.ranks[2].clock_offset_ns, -8.0 * kMs, 20 * kUs);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(b.ranks[r].last, a.ranks[r].last) << r;
    EXPECT_NEAR(b.ranks[r].blame_ns, a.ranks[r].blame_ns, 0.01 * a.ranks[2].blame_ns) << r;
    EXPECT_NEAR(b.ranks[r].waited_ns, a.ranks[r].waited_ns, 0.01 * a.ranks[0].waited_ns) << r;
  }
  EXPECT_EQ(comm_straggler_ranks(b), std::vector<int>{2});
}

// Only the truly late rank is named: no other rank arrives last, none gets more than 1 % of its blame.
void expect_only_late_rank_blamed(const CommReport& rep, int late) {
  EXPECT_EQ(comm_straggler_ranks(rep), std::vector<int>{late});
  for (const CommRankStats& r : rep.ranks) {
    if (r.rank == late) continue;
    EXPECT_EQ(r.last, 0u) << "rank " << r.rank;
    EXPECT_LT(r.blame_ns, 0.01 * rep.ranks[late].blame_ns) << "rank " << r.rank;
  }
}

// %globaltimer is per GPU (issue 11 item 6): one GPU of a host reading 400 us ahead of its
// neighbours was blamed for every collective while offsets were per host.
TEST(CommAnalysis, OneGpuSkewedOnOneHostIsCorrectedPerRank) {
  Scenario sc;
  sc.hosts = {"a", "a", "a", "a"};
  sc.host_clock_shift = {0, 400 * kUs, 0, 0};
  CommReport rep = analyze(build(sc));
  EXPECT_TRUE(rep.clock.corrected);
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 400.0 * kUs, 10 * kUs);
  EXPECT_NEAR(rep.clock.hosts[0].spread_ns, 400.0 * kUs, 10 * kUs);
  expect_only_late_rank_blamed(rep, 2);
}

TEST(CommAnalysis, OneGpuSkewedOnTwoHostsIsCorrectedPerRank) {
  Scenario sc;
  sc.late_rank = 1;
  sc.host_clock_shift = {0, 0, -8 * kMs, -8 * kMs + 400 * kUs};
  CommReport rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[2].clock_offset_ns, -8.0 * kMs, 10 * kUs);
  EXPECT_NEAR(rep.ranks[3].clock_offset_ns, -8.0 * kMs + 400 * kUs, 10 * kUs);
  expect_only_late_rank_blamed(rep, 1);
}

// A fixed offset per run turns ppm drift into invented lateness (issue 11 item 7): 50 ppm over
// 6 s is 300 us.
TEST(CommAnalysis, DriftIsFittedPerRankAndReported) {
  Scenario sc;
  sc.ncoll = 300;
  sc.late_rank = 0;
  sc.host_clock_shift = {0, 0, 0, 2 * kMs};
  sc.drift_ppm = {0, 0, 0, 50};
  CommReport rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[3].clock_drift_ppm, 50, 1);
  EXPECT_NEAR(rep.ranks[3].clock_offset_ns, 2.0 * kMs, 10 * kUs);
  EXPECT_LT(rep.ranks[3].clock_residual_ns, 10 * kUs);
  EXPECT_LT(rep.clock.residual_ns, 10 * kUs);
  EXPECT_NEAR(rep.clock.max_abs_drift_ppm, 50, 1);
  expect_only_late_rank_blamed(rep, 0);
}

// Ops whose GPU times belong to other work stay out of blame and of the clock fit, counted.
TEST(CommAnalysis, SuspectGpuTimesStayOutOfBlameAndClockFit) {
  Scenario sc;
  RunModel m = build(sc);
  for (int i = 3; i < 100; i += 7) {
    Collective& c = m.ranks[3].windows[0].collectives[i];
    c.gpu_start_ns += 30 * kMs;  // another work's timestamps: would make rank 3 late
    c.gpu_end_ns += 30 * kMs;
    c.gpu_time_suspect = "out_of_order";
  }
  CommReport rep = analyze(m);
  EXPECT_EQ(rep.suspect, 14u);
  EXPECT_EQ(rep.incomplete, 14u);
  EXPECT_EQ(rep.ranks[3].suspect, 14u);
  EXPECT_LT(std::abs(rep.ranks[3].clock_offset_ns), 10 * kUs);
  expect_only_late_rank_blamed(rep, 2);
}

TEST(CommAnalysis, SequenceGapsArePerCommunicator) {
  Scenario sc;
  RunModel m = build(sc);
  for (RankData& r : m.ranks) {
    auto& v = r.windows[0].collectives;
    v.erase(std::remove_if(v.begin(), v.end(), [](const Collective& c) { return c.seq == 5 || c.seq == 6; }), v.end());
  }
  CommReport rep = analyze(m);
  ASSERT_EQ(rep.comms.size(), 1u);
  EXPECT_EQ(rep.comms[0].seq_gaps, 2u);
  EXPECT_EQ(analyze(build(sc)).comms[0].seq_gaps, 0u);
}

TEST(CommAnalysis, BalancedRanksHaveNoStraggler) {
  Scenario sc;
  sc.late_rank = -1;
  CommReport rep = analyze(build(sc));
  EXPECT_TRUE(rep.stragglers.empty());
  for (const CommRankStats& r : rep.ranks) EXPECT_EQ(r.last, 0u);  // arrivals within the 20 us floor
  // Noticeable but random lateness: every rank last about a quarter of the time, none persistently.
  sc.jitter = 2 * kMs;
  rep = analyze(build(sc));
  EXPECT_TRUE(rep.stragglers.empty()) << rep.stragglers.size();
  uint64_t lasts = 0;
  for (const CommRankStats& r : rep.ranks) lasts += r.last;
  EXPECT_GE(lasts, 95u);
}

TEST(CommAnalysis, OccasionalLatenessIsNotPersistent) {
  Scenario sc;
  sc.late_share = 0.4;  // below (1 + 1/4) / 2
  CommReport rep = analyze(build(sc));
  EXPECT_TRUE(rep.stragglers.empty());
  EXPECT_GT(rep.ranks[2].blame_ns, 10 * rep.ranks[0].blame_ns);  // still the one to blame
}

TEST(CommAnalysis, FewCollectivesAreNotEnoughForAVerdict) {
  Scenario sc;
  sc.ncoll = 15;
  sc.late_share = 1;
  CommReport rep = analyze(build(sc));
  EXPECT_EQ(rep.ranks[2].last, 15u);
  EXPECT_TRUE(rep.stragglers.empty());
}

TEST(CommAnalysis, BandwidthFactorsAndSlowCollectives) {
  EXPECT_DOUBLE_EQ(bus_factor("AllReduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor("AllGather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("ReduceScatter", 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor("Broadcast", 8), 1);
  EXPECT_DOUBLE_EQ(bus_factor("Reduce", 8), 1);
  EXPECT_DOUBLE_EQ(algbw_bytes("AllGather", 100, 4), 400);
  EXPECT_DOUBLE_EQ(algbw_bytes("ReduceScatter", 100, 4), 400);
  EXPECT_DOUBLE_EQ(algbw_bytes("AllReduce", 100, 4), 100);

  Scenario sc;
  sc.late_rank = -1;
  sc.slow_seqs = {10, 50};
  RunModel m = build(sc);
  CommReport rep = analyze(m);
  ASSERT_EQ(rep.comms.size(), 1u);
  const CommSummary& c = rep.comms[0];
  EXPECT_EQ(c.slow_count, 2u);
  ASSERT_EQ(c.slow.size(), 2u);
  // 4 MiB in 200 us: algbw 20.97 GB/s, busbw x1.5; the slow ones take 2 ms.
  double algbw = double(4 << 20) / (200.0 * kUs);
  EXPECT_NEAR(c.slow[0].median_busbw_gbps, algbw * 1.5, 0.02 * algbw);
  EXPECT_NEAR(c.slow[0].busbw_gbps, algbw * 1.5 / 10, 0.002 * algbw);
  EXPECT_NEAR(c.slow[0].algbw_gbps, algbw / 10, 0.002 * algbw);
  std::vector<uint64_t> seqs = {c.slow[0].seq, c.slow[1].seq};
  std::sort(seqs.begin(), seqs.end());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{10, 50}));
  EXPECT_EQ(m.strings.at(c.slow[0].func), "AllReduce");
}

TEST(CommAnalysis, IncompleteCollectivesAndP2pAreCountedNotMatched) {
  Scenario sc;
  sc.missing_rank_seq = 5;
  RunModel m = build(sc);
  Collective p2p;
  p2p.p2p = true;
  p2p.comm = m.strings.intern("00000000c0ffee00");
  p2p.func = m.strings.intern("Send");
  p2p.peer = 1;
  p2p.bytes = 64;
  p2p.gpu_start_ns = kT0;
  p2p.gpu_end_ns = kT0 + 3 * kUs;
  m.ranks[0].windows[0].collectives.push_back(p2p);
  // A collective without GPU times on one rank cannot be placed either.
  m.ranks[1].windows[0].collectives[7].gpu_start_ns = 0;
  m.ranks[1].windows[0].collectives[7].gpu_end_ns = 0;
  CommReport rep = analyze(m);
  EXPECT_EQ(rep.matched, 98u);
  EXPECT_EQ(rep.incomplete, 2u);
  EXPECT_EQ(rep.p2p, 1u);
  EXPECT_EQ(rep.ranks[0].p2p_ops, 1u);
  EXPECT_EQ(rep.ranks[0].p2p_bytes, 64u);
  EXPECT_DOUBLE_EQ(rep.ranks[0].p2p_gpu_ns, 3.0 * kUs);
  EXPECT_EQ(rep.ops, 4u * 100 - 1 + 1);
  // Version 4: p2p counted per communicator, not listed.
  CaptureWindow::P2pCounts counts;
  counts.comm = p2p.comm;
  counts.sends = 3;
  counts.recvs = 2;
  counts.send_bytes = 300;
  counts.recv_bytes = 200;
  m.ranks[2].windows[0].p2p.push_back(counts);
  rep = analyze(m);
  EXPECT_EQ(rep.p2p, 6u);
  EXPECT_EQ(rep.ranks[2].p2p_ops, 5u);
  EXPECT_EQ(rep.ranks[2].p2p_bytes, 500u);
}

// Issue 27, row 1: collectives of one ncclGroupStart/End run in one kernel and overlap on the
// GPU. Matched as a group, one arrival per rank: the late rank is named, nobody else.
TEST(CommAnalysis, GroupedCollectivesAreOneArrival) {
  for (int group : {2, 4}) {
    Scenario sc;
    sc.group = group;
    sc.late_share = 1;
    sc.ncoll = 60;
    CommReport rep = analyze(build(sc));
    EXPECT_EQ(rep.matched, uint64_t(60 * group)) << group;
    EXPECT_EQ(rep.incomplete, 0u) << group;
    EXPECT_EQ(rep.arrivals, 60u) << group;
    EXPECT_EQ(rep.ranks[2].last, 60u) << group;
    EXPECT_EQ(rep.ranks[2].collectives, 60u) << group;
    expect_only_late_rank_blamed(rep, 2);
    ASSERT_FALSE(rep.worst.empty());
    EXPECT_EQ(rep.worst[0].ops, size_t(group));
  }
}

// Issue 27, row 4: one rank's kernels end late every time (a slow GPU). The fit alone reads it as
// a clock offset (ends agree after subtracting it) and the others then look late; the host
// callbacks of GPUs on one host show that its clock is not off.
TEST(CommAnalysis, ALateEndingGpuIsNotTakenForAClockOffset) {
  Scenario sc;
  sc.hosts = {"a", "a", "a", "a"};
  sc.late_end_rank = 1;
  sc.late_end = 200 * kUs;
  sc.late_share = 1;
  sc.callbacks = true;
  CommReport rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 0, 30 * kUs);
  EXPECT_EQ(rep.ranks[1].clock_source, "host callbacks");
  EXPECT_EQ(rep.clock.callback_corrected, std::vector<int>{1});
  EXPECT_NEAR(rep.ranks[1].late_end_ns, 200.0 * kUs, 30 * kUs);
  expect_only_late_rank_blamed(rep, 2);

  // Without callbacks (older files) the fit stands: this is what the check prevents.
  sc.callbacks = false;
  CommReport fit_only = analyze(build(sc));
  EXPECT_NEAR(fit_only.ranks[1].clock_offset_ns, 200.0 * kUs, 30 * kUs);

  // Nobody late: nobody blamed, the late end reported.
  sc.callbacks = true;
  sc.late_rank = -1;
  rep = analyze(build(sc));
  EXPECT_TRUE(rep.stragglers.empty());
  for (const CommRankStats& r : rep.ranks) EXPECT_EQ(r.last, 0u) << r.rank;
  EXPECT_NEAR(rep.ranks[1].late_end_ns, 200.0 * kUs, 30 * kUs);
}

// A GPU whose proxy thread is starved of CPU (a loaded host) reads its stamps late most of the
// time: its callbacks' floor is not its clock's offset. Its real skew (400 us) stays the fit's,
// not "corrected" by the late floor.
TEST(CommAnalysis, AStarvedProxyDoesNotOverruleTheFit) {
  Scenario sc;
  sc.hosts = {"a", "a", "a", "a"};
  sc.host_clock_shift = {0, 400 * kUs, 0, 0};
  sc.callbacks = true;
  sc.starved_proxy_rank = 1;
  CommReport rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 400.0 * kUs, 10 * kUs);
  EXPECT_EQ(rep.ranks[1].clock_source, "fit");
  EXPECT_TRUE(rep.clock.callback_corrected.empty());
  expect_only_late_rank_blamed(rep, 2);
  // A late-ending GPU beside it is still found by its own (prompt) callbacks.
  sc.host_clock_shift = {0, 0, 0, 0};
  sc.starved_proxy_rank = 3;
  sc.late_end_rank = 1;
  sc.late_end = 200 * kUs;
  rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 0, 30 * kUs);
  EXPECT_EQ(rep.clock.callback_corrected, std::vector<int>{1});
  expect_only_late_rank_blamed(rep, 2);
}

// A GPU late all along (its kernels start and end 3 ms late: a slow GPU that is everyone's
// bottleneck) looks exactly like a clock 3 ms ahead; the host callbacks tell them apart.
TEST(CommAnalysis, AGpuLateAllAlongIsBlamedNotAligned) {
  Scenario sc;
  sc.hosts = {"a", "a", "a", "a"};
  sc.late_rank = 1;
  sc.late_by = 3 * kMs;
  sc.late_share = 1;
  sc.late_end_rank = 1;
  sc.late_end = 3 * kMs;
  sc.callbacks = true;
  CommReport rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 0, 30 * kUs);
  expect_only_late_rank_blamed(rep, 1);
  // A real skew of the same size is still corrected (the callbacks agree with the fit).
  sc.late_rank = 2;
  sc.late_end_rank = -1;
  sc.host_clock_shift = {0, 3 * kMs, 0, 0};
  rep = analyze(build(sc));
  EXPECT_NEAR(rep.ranks[1].clock_offset_ns, 3.0 * kMs, 10 * kUs);
  EXPECT_EQ(rep.ranks[1].clock_source, "fit");
  expect_only_late_rank_blamed(rep, 2);
}

// Issue 27, row 5: pipeline parallelism is send/recv. Stage 2 computes 3 ms longer; stages 0 and 1
// wait for it through their sends, stage 3 through its receives. Stage 1 then reaches stage 0's
// send late because it waited for stage 2: it passes that on, and only stage 2 is named.
RunModel pipeline(int stages, int microbatches, int slow_stage, int64_t extra) {
  RunModel m;
  uint32_t comm = m.strings.intern("00000000beef0004");
  uint32_t send = m.strings.intern("Send"), recv = m.strings.intern("Recv");
  for (int r = 0; r < stages; ++r) {
    RankData rd;
    rd.rank = r;
    rd.host = "a";
    rd.world_size = stages;
    CaptureWindow w;
    w.start_ns = kT0;
    w.end_ns = kT0 + int64_t(microbatches + stages) * 10 * kMs;
    rd.windows.push_back(w);
    m.ranks.push_back(rd);
  }
  m.world_size = stages;
  std::vector<int64_t> free_at(stages, kT0);
  auto op = [&](int r, uint32_t func, int peer, uint64_t index, int64_t start, int64_t end) {
    Collective c;
    c.p2p = true;
    c.comm = comm;
    c.comm_nranks = stages;
    c.comm_rank = r;
    c.func = func;
    c.peer = peer;
    c.seq = index;
    c.bytes = 1 << 20;
    c.upload_start_ns = start - 30 * kUs;
    c.gpu_start_ns = start;
    c.gpu_end_ns = end;
    c.group = m.ranks[r].windows[0].collectives.size() + 1;  // each op its own plan
    m.ranks[r].windows[0].collectives.push_back(c);
  };
  for (int mb = 0; mb < microbatches; ++mb) {
    int64_t ready = free_at[0];
    for (int s = 0; s < stages; ++s) {
      const int64_t done = ready + 2 * kMs + (mb * 7 + s * 3) % 5 * kUs + (s == slow_stage ? extra : 0);
      if (s == stages - 1) {
        free_at[s] = done;
        break;
      }
      const int64_t recv_arrive = free_at[s + 1];
      const int64_t end = std::max(done, recv_arrive) + 200 * kUs;
      op(s, send, s + 1, mb, done, end);
      op(s + 1, recv, s, mb, recv_arrive, end);
      free_at[s] = ready = end;
    }
  }
  return m;
}

TEST(CommAnalysis, APipelineStageThatHoldsEveryoneUpIsNamed) {
  CommReport rep = analyze(pipeline(4, 60, 2, 3 * kMs));
  EXPECT_EQ(rep.p2p_pairs, 180u);
  EXPECT_EQ(rep.arrivals, 180u);
  EXPECT_EQ(comm_straggler_ranks(rep), std::vector<int>{2});
  for (int r : {0, 1, 3}) {
    EXPECT_LT(rep.ranks[r].last, 3u) << r;  // the pipeline's fill only
    EXPECT_LT(rep.ranks[r].blame_ns, 0.05 * rep.ranks[2].blame_ns) << r;
  }
  EXPECT_GT(rep.ranks[2].last, 100u);
  // Balanced stages: nobody.
  rep = analyze(pipeline(4, 60, -1, 0));
  EXPECT_TRUE(rep.stragglers.empty());
}

// Issue 27, row 2: NCCL 2.29+ shifted the work counter (Broadcast from several roots): the GPU
// times of later ops are other work's. On one host the ranks' enqueue times stand in; across
// hosts (no common clock) nobody is named from them and the report says why.
TEST(CommAnalysis, ShiftedGpuTimesFallBackToEnqueueTimesOnOneHost) {
  Scenario sc;
  sc.hosts = {"a", "a", "a", "a"};
  sc.late_share = 1;
  RunModel m = build(sc);
  for (RankData& r : m.ranks)
    for (Collective& c : r.windows[0].collectives)
      if (c.seq >= 20) {
        c.gpu_shifted = true;
        c.gpu_start_ns = c.gpu_end_ns = 0;  // ignored at capture (the default)
      }
  CommReport rep = analyze(m);
  EXPECT_EQ(rep.matched, 100u);
  EXPECT_EQ(rep.host_timed, 80u);
  EXPECT_EQ(rep.comms[0].host_timed, 80u);
  expect_only_late_rank_blamed(rep, 2);

  // Kept on request (LAGGARD_NCCL_KERNEL_EVENTS=1): flagged by the reader, the same fallback.
  RunModel kept = build(sc);
  for (RankData& r : kept.ranks)
    for (Collective& c : r.windows[0].collectives)
      if (c.seq >= 20) {
        c.gpu_shifted = true;
        c.gpu_time_suspect = "shifted";
      }
  EXPECT_EQ(analyze(kept).host_timed, 80u);

  sc.hosts = {"a", "a", "b", "b"};
  RunModel two_hosts = build(sc);
  for (RankData& r : two_hosts.ranks)
    for (Collective& c : r.windows[0].collectives)
      if (c.seq >= 20) c.gpu_shifted = true, c.gpu_start_ns = c.gpu_end_ns = 0;
  rep = analyze(two_hosts);
  EXPECT_EQ(rep.matched, 20u);
  EXPECT_EQ(rep.shifted, 80u);
  EXPECT_EQ(rep.host_timed, 0u);
  for (const CommRankStats& r : rep.ranks) EXPECT_LE(r.collectives, 20u);
}

// Issue 27: a process driving two GPUs has a clock per GPU (Collective::device).
TEST(CommAnalysis, EachGpuOfAProcessHasItsOwnClock) {
  // 4 GPUs in 2 processes (ranks 0, 1): GPU 3 (rank 1's second) reads 4 ms ahead; GPU 0 is late.
  Scenario sc;
  sc.late_rank = 0;
  sc.late_share = 1;
  sc.host_clock_shift = {0, 0, 0, 4 * kMs};
  sc.hosts = {"a", "a", "a", "a"};
  RunModel gpus = build(sc);
  RunModel m;
  m.strings = gpus.strings;
  m.world_size = 2;
  for (int p = 0; p < 2; ++p) {
    RankData rd = gpus.ranks[2 * p];
    rd.rank = p;
    for (int g = 0; g < 2; ++g)
      for (Collective c : gpus.ranks[2 * p + g].windows[0].collectives) {
        c.device = g;
        if (g) rd.windows[0].collectives.push_back(c);
        else {
          // already there (the first GPU's ops are rd's own): mark the device only
        }
      }
    for (Collective& c : rd.windows[0].collectives)
      if (c.device < 0) c.device = 0;
    m.ranks.push_back(rd);
  }
  CommReport rep = analyze(m);
  ASSERT_EQ(rep.ranks.size(), 2u);
  ASSERT_EQ(rep.ranks[1].gpu_clocks.size(), 2u);
  EXPECT_NEAR(rep.ranks[1].gpu_clocks[1].offset_ns, 4.0 * kMs, 20 * kUs);
  EXPECT_NEAR(rep.ranks[1].gpu_clocks[0].offset_ns, 0, 20 * kUs);
  EXPECT_EQ(comm_straggler_ranks(rep), std::vector<int>{0});
  EXPECT_EQ(rep.ranks[1].last, 0u);
}

TEST(CommAnalysis, NoNcclDataIsAnEmptyReport) {
  RunModel m;
  RankData r;
  r.rank = 0;
  r.windows.push_back({});
  m.ranks.push_back(r);
  CommReport rep = analyze(m);
  EXPECT_EQ(rep.ops, 0u);
  EXPECT_EQ(rep.matched, 0u);
  EXPECT_TRUE(rep.comms.empty());
  EXPECT_TRUE(rep.stragglers.empty());
}

}  // namespace
}  // namespace laggard::report
