// The report's reader at scale (issue 14): bytes per kernel record on disk, read MB/s and
// records/s, wall time and peak RSS, for runs in the JSON (schema v4/v5) or binary (v5) format.
//
//   laggard-bench-reader generate DIR RANKS KERNELS STEPS json|binary
//   laggard-bench-reader read DIR [THREADS]
//
// `generate` writes a run with the library's own SegmentWriter (a 10 s flush window per 25
// steps, one "step" section, KERNELS kernels of distinct names per step); `read` runs read_run on it in a
// process of its own, so the peak RSS is the reader's. bench/reader-scale runs both.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "frame_out.h"
#include "reader.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace {

constexpr int64_t kRunStart = 1'700'000'000'000'000'000;
constexpr int64_t kStepNs = 400'000'000;

laggard::FileInfo file_info(int rank, int ranks) {
  laggard::FileInfo fi;
  fi.run_id = "bench";
  fi.run_id_source = "bench";
  fi.rank = rank;
  fi.local_rank = rank % 8;
  fi.world_size = ranks;
  fi.rank_source = "RANK";
  fi.host = "node" + std::to_string(rank / 8);
  fi.pid = 1000 + rank;
  fi.flush_s = 10;
  fi.nvtx_status = "on";
  fi.cupti_enabled = true;
  fi.nccl_status = "off: bench";
  return fi;
}

void add_kernel(laggard::GpuRecords& r, uint32_t name, int64_t start, int64_t dur, uint32_t correlation, int k) {
  r.kind.push_back(0);
  r.name.push_back(name);
  r.section.push_back(0);
  r.start_ns.push_back(start);
  r.dur_ns.push_back(dur);
  r.api_start_ns.push_back(start - 4000 - k % 300);
  r.api_dur_ns.push_back(3000 + k % 500);
  r.tid.push_back(31337);
  r.correlation.push_back(correlation);
  r.device.push_back(0);
  r.stream.push_back(7 + k % 3);
  r.shape.push_back(k % 4);
  r.bytes.push_back(0);
  r.copy_kind.push_back(0);
  r.flags.push_back(k % 100 == 99 ? laggard::kGpuFlagNccl : 0);
}

// One flush window of one rank: `steps` steps (a "step" section occurrence each) of `kernels`
// kernels back to back; statistics per kernel over the window, as capture writes them.
laggard::WindowSnapshot flush_window(int rank, int index, int first_step, int steps, int kernels,
                                     uint32_t& correlation) {
  laggard::WindowSnapshot w;
  w.index = static_cast<uint64_t>(index);
  w.start_ns = kRunStart + int64_t(first_step) * kStepNs;
  w.end_ns = w.start_ns + int64_t(steps) * kStepNs;
  laggard::SectionWindowStats s;
  s.name = "step";
  s.count = static_cast<uint64_t>(steps);
  s.total_ns = int64_t(steps) * (kStepNs - 1000);
  s.min_ns = s.max_ns = s.median_ns = kStepNs - 1000;
  laggard::GpuWindow& g = w.gpu;
  g.present = g.sampled = true;
  g.strings.push_back("step");
  for (int i = 0; i < 4; ++i) g.records.shapes.push_back({uint32_t(64 << i), 1, 1, 256, 1, 1});
  for (int k = 0; k < kernels; ++k) {
    g.strings.push_back("_Z" + std::to_string(10 + k % 90) + "kernel_" + std::to_string(k) + "PfS_S_i");
    laggard::GpuKernelStats st;
    st.section = 0;
    st.name = static_cast<uint32_t>(g.strings.size() - 1);
    st.grid = {uint32_t(64 << (k % 4)), 1, 1};
    st.block = {256, 1, 1};
    st.min_ns = INT64_MAX;
    g.kernels.push_back(st);
  }
  for (int step = first_step; step < first_step + steps; ++step) {
    int64_t t = kRunStart + int64_t(step) * kStepNs + 10'000;
    s.start_ns.push_back(t - 9'500);
    s.dur_ns.push_back(kStepNs - 1000);
    s.tid.push_back(31337);
    for (int k = 0; k < kernels; ++k) {
      int64_t dur = 50'000 + (int64_t(k) * 7919 + rank * 13 + step * 101) % 300'000;
      add_kernel(g.records, static_cast<uint32_t>(k + 1), t, dur, correlation++, k);
      laggard::GpuKernelStats& st = g.kernels[static_cast<size_t>(k)];
      ++st.count;
      st.total_ns += dur;
      st.min_ns = std::min(st.min_ns, dur);
      st.max_ns = std::max(st.max_ns, dur);
      st.median_ns = dur;
      t += dur + 2000;
    }
  }
  w.sections.push_back(s);
  w.gpu_status.cupti = "on";
  return w;
}

// Steps per flush window: a 10 s flush over the GTC 2020 job's ~0.4 s steps.
constexpr int kStepsPerWindow = 25;

int generate(const std::string& dir, int ranks, int kernels, int steps, bool binary) {
  uint64_t records = 0, written = 0, rank0_columns = 0, rank0_records = 0;  // written: bytes of every file write, rewrites included
  for (int rank = 0; rank < ranks; ++rank) {
    laggard::SegmentWriter writer(dir, file_info(rank, ranks), 30, 64u << 20);
    if (binary) writer.set_format(laggard::FileFormat::binary);
    uint32_t correlation = 1;
    for (int first = 0, index = 0; first < steps; first += kStepsPerWindow, ++index) {
      int n = std::min(kStepsPerWindow, steps - first);
      laggard::WindowSnapshot w = flush_window(rank, index, first, n, kernels, correlation);
      records += w.gpu.records.size();
      if (rank == 0) rank0_columns += laggard::encode_gpu_records(w.gpu.records, w.start_ns).size();
      if (rank == 0) rank0_records += w.gpu.records.size();
      if (std::string err = writer.write(w, w.dropped, first + n == steps, 0); !err.empty()) {
        std::fprintf(stderr, "write failed: %s\n", err.c_str());
        return 1;
      }
      written += binary ? 0 : fs::file_size(writer.current_path());  // JSON: the segment is rewritten whole
    }
  }
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.file_size();
  if (binary) written = bytes;  // appended once each
  std::printf("records as v5 columns before compression: %.1f bytes per kernel record\n",
              double(rank0_columns) / double(std::max<uint64_t>(rank0_records, 1)));
  std::printf("generated %s: %d ranks x %d kernels x %d steps = %llu kernel records, %.1f MB on disk, "
              "%.1f bytes per kernel record (everything in the files counted), %.2fx the final size written\n",
              binary ? "binary" : "json", ranks, kernels, steps, (unsigned long long)records, bytes / 1e6,
              double(bytes) / double(records), double(written) / double(bytes));
  return 0;
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int read(const std::string& dir, unsigned threads) {
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.file_size();
  laggard::report::ReadOptions opts;
  opts.threads = threads;
  auto t0 = std::chrono::steady_clock::now();
  laggard::report::RunModel m = laggard::report::read_run(dir, opts);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t records = 0;
  for (const auto& r : m.ranks)
    for (const auto& w : r.windows) records += w.gpu.size();
  std::printf("read %zu ranks, %llu kernel records, %.1f MB in %.2f s on %u thread(s): %.0f MB/s, %.2f M records/s, "
              "peak RSS %.0f MiB, %zu problem(s)\n",
              m.ranks.size(), (unsigned long long)records, bytes / 1e6, s, threads, bytes / 1e6 / s, records / 1e6 / s,
              peak_rss_kb() / 1024.0, m.problems.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "generate") == 0)
    return generate(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]),
                    std::strcmp(argv[6], "binary") == 0);
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "read") == 0)
    return read(argv[2], argc == 4 ? static_cast<unsigned>(std::atoi(argv[3])) : 0);
  std::fprintf(stderr,
               "usage: laggard-bench-reader generate DIR RANKS KERNELS STEPS json|binary\n"
               "       laggard-bench-reader read DIR [THREADS]\n");
  return 2;
}
