#include "simulate.h"

#include <algorithm>
#include <cstdio>

namespace laggard::gen {
namespace {

constexpr int64_t kLaunchNs = 5'000;      // host time of one launch call
constexpr int64_t kHostGapNs = 2'000;     // host time between launch calls
constexpr int64_t kQueueNs = 4'000;       // launch-to-ready latency of the GPU
constexpr int64_t kAllreduceNs = 400'000; // all-reduce kernel once every rank has arrived
constexpr int64_t kStepGapNs = 50'000;    // host work between steps (outside any range)
constexpr int64_t kSyncNs = 10'000;       // host notices the step's end (loss.item())

// splitmix64 (Steele, Lea, Flood 2014): a counter-based stream, the same on every platform.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

enum Stream : uint64_t { kWork = 1, kEnd = 2, kKernelDefs = 3 };

Rng rng_for(uint64_t seed, uint64_t rank, uint64_t step, Stream stream) {
  Rng r{seed};
  uint64_t key = r.next() ^ (rank * 0x9e3779b97f4a7c15ull) ^ (step << 40) ^ (uint64_t(stream) << 60);
  return Rng{Rng{key}.next()};
}

int64_t jittered(Rng& rng, double jitter, int64_t ns) {
  return static_cast<int64_t>(double(ns) * (1 + jitter * (2 * rng.uniform() - 1)));
}

// fwd takes the first 30 % of the kernels, bwd the next 55 %, opt the rest (each at least one).
int section_of(int i, int k) {
  int fwd = std::max(1, k * 30 / 100), bwd = std::max(1, k * 55 / 100);
  if (i < fwd) return 0;
  return i < fwd + bwd ? 1 : 2;
}

std::vector<KernelDef> make_kernels(const Spec& spec) {
  Rng rng = rng_for(spec.seed, 0, 0, kKernelDefs);
  std::vector<KernelDef> defs;
  for (int i = 0; i < spec.kernels; ++i) {
    KernelDef d;
    d.section = section_of(i, spec.kernels);
    char name[64];
    std::snprintf(name, sizeof name, "sm90_xmma_gemm_%s_k%04d", kSectionNames[d.section], i);
    d.name = name;
    d.dur_ns = 10'000 + static_cast<int64_t>(rng.uniform() * 590'000);
    defs.push_back(std::move(d));
  }
  return defs;
}

}  // namespace

Job::Job(const Spec& spec) : spec_(spec), kernels_(make_kernels(spec)) {
  for (int k = 0; k < spec_.steps; ++k) {
    int64_t last_arrival = 0;
    for (int r = 0; r < spec_.ranks; ++r)
      last_arrival = std::max(last_arrival, simulate(r, k, step_start_ns(r, k), nullptr));
    done_ns_.push_back(last_arrival + kAllreduceNs);
  }
}

int64_t Job::allreduce_end_ns(int rank, int step) const {
  Rng rng = rng_for(spec_.seed, rank, step, kEnd);
  return done_ns_[step] + jittered(rng, spec_.jitter, 2'000);
}

int64_t Job::step_start_ns(int rank, int step) const {
  Rng rng = rng_for(spec_.seed, rank, step, kEnd);
  (void)rng.next();  // the first draw is this step's all-reduce end (allreduce_end_ns); the second its gap
  int64_t gap = jittered(rng, spec_.jitter, kStepGapNs);
  if (step == 0) return kRunStartNs + gap;
  return allreduce_end_ns(rank, step - 1) + kSyncNs + gap;
}

int64_t Job::simulate(int rank, int step, int64_t start_ns, StepTrace* out) const {
  Rng rng = rng_for(spec_.seed, rank, step, kWork);
  const double jit = spec_.jitter;
  int64_t host = start_ns, gpu_free = start_ns;
  int open_section = -1;
  for (int i = 0; i < spec_.kernels; ++i) {
    const KernelDef& def = kernels_[i];
    if (def.section != open_section) {
      if (out && open_section >= 0) out->section_end_ns[open_section] = host;
      open_section = def.section;
      if (out) out->section_start_ns[open_section] = host;
    }
    double factor = 1;
    for (const Straggler& s : spec_.stragglers)
      if (!s.late_collective() && s.hits(rank, step) && (s.section.empty() || s.section == kSectionNames[def.section]))
        factor *= s.factor;
    Launch l;
    l.kernel = i;
    host += jittered(rng, jit, kHostGapNs);
    l.api_start_ns = host;
    l.api_end_ns = host + jittered(rng, jit, kLaunchNs);
    host = l.api_end_ns;
    l.gpu_start_ns = std::max(l.api_end_ns + kQueueNs, gpu_free);
    l.gpu_end_ns = l.gpu_start_ns + static_cast<int64_t>(double(jittered(rng, jit, def.dur_ns)) * factor);
    gpu_free = l.gpu_end_ns;
    if (out) out->launches.push_back(l);
  }
  if (out) out->section_end_ns[open_section] = host;
  // A late collective: the host waits for its GPU, then stalls before launching the all-reduce.
  for (const Straggler& s : spec_.stragglers)
    if (s.late_collective() && s.hits(rank, step)) host = std::max(host, gpu_free) + s.delay_ns;
  host += jittered(rng, jit, kHostGapNs);
  const int64_t launch_end = host + jittered(rng, jit, kLaunchNs);
  const int64_t arrival = std::max(launch_end + kQueueNs, gpu_free);
  if (out) {
    out->collective_launch_ns = host;
    out->launches.push_back({-1, host, launch_end, arrival, 0});
  }
  return arrival;
}

StepTrace Job::step(int rank, int step) const {
  StepTrace t;
  t.launches.reserve(kernels_.size() + 1);
  t.start_ns = step_start_ns(rank, step);
  simulate(rank, step, t.start_ns, &t);
  Launch& allreduce = t.launches.back();
  allreduce.gpu_end_ns = allreduce_end_ns(rank, step);
  t.end_ns = allreduce.gpu_end_ns + kSyncNs;
  return t;
}

}  // namespace laggard::gen
