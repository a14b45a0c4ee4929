#include "synthetic_run.h"

#include <algorithm>
#include <map>
#include <random>

namespace laggard::synth {
namespace {

using report::CaptureWindow;
using report::Collective;
using report::GpuActivity;
using report::RankData;
using report::RunModel;
using report::SectionWindow;

constexpr int64_t kT0 = 1'800'000'000'000'000'000;  // an epoch time in 2027
constexpr int64_t kQueueNs = 4'000;                  // launch-to-ready latency of the GPU

struct HostRange {
  std::string name, parent;
  int64_t start, end;
};

struct RankSim {
  std::vector<std::pair<int64_t, int64_t>> cpu_waits;  // (when, ns) of cpu_stall faults
  std::vector<HostRange> ranges;
  std::vector<GpuActivity> gpu;
  std::vector<Collective> colls;
};

bool applies(const Fault& f, int rank, int step, const std::string& section) {
  return f.rank == rank && step >= f.first_step && step < f.last_step &&
         (f.section.empty() || f.section == section);
}

}  // namespace

std::vector<KernelSpec> Spec::default_kernels() {
  return {
      {"embedding_fwd", "forward", 30'000},  {"gemm_fwd_a", "forward", 120'000},
      {"softmax_fwd", "forward", 25'000},    {"gemm_fwd_b", "forward", 110'000},
      {"[memcpy HtoD]", "forward", 15'000, GpuKind::memcpy},
      {"gemm_bwd_a", "backward", 220'000},   {"elementwise_bwd", "backward", 20'000},
      {"gemm_bwd_b", "backward", 200'000},   {"[memset]", "backward", 5'000, GpuKind::memset},
      {"adam_step", "optimizer", 60'000},
  };
}

RunModel make_run(const Spec& spec) {
  RunModel m;
  m.dir = "synthetic";
  m.run_id = "synthetic";
  m.world_size = spec.ranks;
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<double> noise(1 - spec.jitter, 1 + spec.jitter);
  auto jit = [&](int64_t ns) { return static_cast<int64_t>(double(ns) * noise(rng)); };

  std::vector<RankSim> sim(spec.ranks);
  std::vector<int64_t> host(spec.ranks, kT0), gpu_free(spec.ranks, kT0);
  uint32_t correlation = 1;
  const uint32_t comm = m.strings.intern("0xc0ffee");
  const uint32_t allreduce = m.strings.intern("AllReduce");
  const uint32_t nccl_kernel = m.strings.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");

  for (int step = 0; step < spec.steps; ++step) {
    std::vector<int64_t> arrival(spec.ranks), step_start(spec.ranks), host_launch(spec.ranks);
    for (int r = 0; r < spec.ranks; ++r) {
      RankSim& s = sim[r];
      step_start[r] = host[r];
      for (const Fault& f : spec.faults) {
        if ((f.kind != Fault::Kind::step_stall && f.kind != Fault::Kind::cpu_stall) || !applies(f, r, step, ""))
          continue;
        if (f.kind == Fault::Kind::cpu_stall) s.cpu_waits.push_back({host[r], f.extra_ns});
        host[r] += f.extra_ns;
      }
      std::map<std::string, HostRange> open;
      for (const KernelSpec& k : spec.kernels) {
        if (!open.count(k.section)) {
          for (auto& [name, range] : open) {  // close the previous section
            range.end = host[r];
            s.ranges.push_back(range);
          }
          open.clear();
          open[k.section] = {k.section, "step", host[r], 0};
        }
        int64_t extra = 0;
        double factor = 1;
        for (const Fault& f : spec.faults) {
          if (f.kind == Fault::Kind::host_bound && applies(f, r, step, k.section)) extra += f.extra_ns;
          if (f.kind == Fault::Kind::slow_gpu && k.kind == GpuKind::kernel && applies(f, r, step, k.section))
            factor *= f.factor;
        }
        host[r] += jit(spec.host_gap_ns) + extra;
        if (!spec.gpu) {  // CPU-only: the section's work is the host's
          host[r] += static_cast<int64_t>(double(jit(k.dur_ns)) * factor);
          continue;
        }
        GpuActivity a;
        a.kind = k.kind;
        a.name = m.strings.intern(k.name);
        a.section = m.strings.intern(k.section);
        a.api_start_ns = host[r];
        a.api_end_ns = host[r] + jit(spec.launch_ns);
        a.api_tid = 1000 + r;
        a.correlation = correlation++;
        a.device = r % spec.ranks_per_host;
        a.stream = 7;
        a.start_ns = std::max(a.api_end_ns + kQueueNs, gpu_free[r]);
        a.end_ns = a.start_ns + static_cast<int64_t>(double(jit(k.dur_ns)) * factor);
        if (k.kind == GpuKind::kernel) {
          a.grid[0] = 1024;
          a.block[0] = 256;
        } else {
          a.bytes = 1 << 20;
          a.copy_kind = k.kind == GpuKind::memcpy ? 1 : 0;
        }
        gpu_free[r] = a.end_ns;
        host[r] = a.api_end_ns;
        s.gpu.push_back(a);
      }
      for (auto& [name, range] : open) {
        range.end = host[r];
        s.ranges.push_back(range);
      }
      if (!spec.gpu) {
        s.ranges.push_back({"step", "", step_start[r], host[r]});
        host[r] += jit(spec.step_gap_ns);
        continue;
      }
      // The all-reduce: launched after the optimizer, on the same stream.
      for (const Fault& f : spec.faults)
        if (f.kind == Fault::Kind::late_collective && applies(f, r, step, "")) host[r] += f.extra_ns;
      host[r] += jit(spec.host_gap_ns);
      host_launch[r] = host[r];
      arrival[r] = std::max(host[r] + spec.launch_ns + kQueueNs, gpu_free[r]);
      for (const Fault& f : spec.faults)
        if (f.kind == Fault::Kind::late_collective_device && applies(f, r, step, "")) arrival[r] += f.extra_ns;
    }
    if (!spec.gpu) continue;
    // Everyone's NCCL kernel runs until the last rank has arrived plus the transfer itself.
    const int64_t done = *std::max_element(arrival.begin(), arrival.end()) + spec.allreduce_ns;
    for (int r = 0; r < spec.ranks; ++r) {
      RankSim& s = sim[r];
      GpuActivity a;
      a.name = nccl_kernel;
      a.section = m.strings.intern("step");
      a.nccl = true;
      a.api_start_ns = host_launch[r];
      a.api_end_ns = host_launch[r] + spec.launch_ns;
      a.api_tid = 1000 + r;
      a.correlation = correlation++;
      a.device = r % spec.ranks_per_host;
      a.stream = 7;
      a.start_ns = arrival[r];
      a.end_ns = done + jit(2'000);
      gpu_free[r] = a.end_ns;
      s.gpu.push_back(a);
      Collective c;
      c.comm = comm;
      c.comm_nranks = spec.ranks;
      c.comm_rank = r;
      c.func = allreduce;
      c.seq = static_cast<uint64_t>(step);
      c.count = 1 << 24;
      c.bytes = 4u << 24;
      c.upload_start_ns = host_launch[r];
      c.upload_end_ns = host_launch[r] + spec.launch_ns;
      c.gpu_start_ns = a.start_ns;
      c.gpu_end_ns = a.end_ns;
      s.colls.push_back(c);
      // The host waits for the step to finish (loss.item()), then does untracked work.
      host[r] = a.end_ns + 10'000;
      s.ranges.push_back({"step", "", step_start[r], host[r]});
      host[r] += jit(spec.step_gap_ns);
    }
  }

  // Cut every rank's data into capture windows of window_s, as the flush thread would.
  const int64_t window_ns = static_cast<int64_t>(spec.window_s * 1e9);
  for (int r = 0; r < spec.ranks; ++r) {
    RankData d;
    d.rank = r;
    d.local_rank = r % spec.ranks_per_host;
    d.world_size = spec.ranks;
    d.host = "node" + std::to_string(r / spec.ranks_per_host);
    d.pid = 4000 + r;
    d.run_id = m.run_id;
    d.process_start_ns = kT0;
    d.final = true;
    d.flush_s = spec.window_s;
    int64_t end = host[r];
    for (int64_t t = kT0, i = 0; t < end; t += window_ns, ++i) {
      CaptureWindow w;
      w.index = static_cast<uint64_t>(i);
      w.start_ns = t;
      w.end_ns = t + window_ns;
      w.gpu_sampled = spec.gpu;
      std::map<std::pair<std::string, std::string>, SectionWindow> secs;
      for (const HostRange& h : sim[r].ranges)
        if (h.end >= w.start_ns && h.end < w.end_ns) {
          SectionWindow& sw = secs[{h.name, h.parent}];
          sw.name = h.name;
          sw.parent = h.parent;
          sw.occurrences.push_back({h.start, h.end - h.start, 1000u + r, 1.0});
          ++sw.count;
          sw.total_ns += h.end - h.start;
        }
      for (auto& [k, sw] : secs) w.sections.push_back(sw);
      for (const GpuActivity& a : sim[r].gpu)
        if (a.end_ns >= w.start_ns && a.end_ns < w.end_ns) w.gpu.push_back(a);
      // Per (section, name) statistics, as the capture writes them for every window.
      std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>> durs;
      std::map<std::pair<uint32_t, uint32_t>, const GpuActivity*> first;
      for (const GpuActivity& a : w.gpu) {
        durs[{a.section, a.name}].push_back(a.end_ns - a.start_ns);
        first.emplace(std::make_pair(a.section, a.name), &a);
      }
      for (auto& [key, v] : durs) {
        const GpuActivity& a = *first[key];
        report::KernelWindowStats k;
        k.section = a.section;
        k.name = a.name;
        k.kind = a.kind;
        k.nccl = a.nccl;
        std::copy(std::begin(a.grid), std::end(a.grid), k.grid);
        std::copy(std::begin(a.block), std::end(a.block), k.block);
        std::sort(v.begin(), v.end());
        k.count = v.size();
        for (int64_t d : v) k.total_ns += d;
        k.min_ns = v.front();
        k.max_ns = v.back();
        k.median_ns = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
        w.kernel_stats.push_back(k);
      }
      for (const Collective& c : sim[r].colls)
        if (c.gpu_end_ns >= w.start_ns && c.gpu_end_ns < w.end_ns) w.collectives.push_back(c);
      if (spec.cpu_wait) {  // as the flush thread reads it: per window, and per 50 ms tick for the NVTX thread
        report::CpuWait c;
        c.threads = 2;
        c.run_ns = window_ns / 2;
        c.nvtx_threads = 1;
        constexpr int64_t kTickNs = 50'000'000;
        for (int64_t t = w.start_ns; t < w.end_ns; t += kTickNs) {
          const int64_t end = std::min(w.end_ns, t + kTickNs);
          int64_t wait = jit((end - t) / 100);
          for (const auto& [at, ns] : sim[r].cpu_waits)
            if (at >= t && at < end) wait += ns;
          c.nvtx_ticks.emplace_back(end, wait);
          c.wait_ns += wait;
        }
        c.max_thread_wait_ns = c.wait_ns;
        w.cpu_wait = std::make_shared<const report::CpuWait>(std::move(c));
      }
      d.windows.push_back(std::move(w));
    }
    d.data_end_ns = d.windows.empty() ? kT0 : d.windows.back().end_ns;
    m.ranks.push_back(std::move(d));
  }
  return m;
}

}  // namespace laggard::synth
