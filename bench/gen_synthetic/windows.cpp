#include "windows.h"

#include <algorithm>
#include <cstdio>

namespace laggard::gen {
namespace {

constexpr uint32_t kTid = 4242;          // the training loop's host thread
constexpr uint32_t kStream = 7;
constexpr uint32_t kStepString = kSectionCount;  // strings: sections, "step", kernels, all-reduce
constexpr uint32_t kFirstKernelString = kSectionCount + 1;
constexpr uint64_t kCommHash = 0x5eed5eed0000c0deull;
constexpr int64_t kLastWindowTailNs = 1'000'000;

// Durations of one key in one window, turned into the statistics the capture writes.
struct DurationSet {
  std::vector<int64_t> durs;

  void fill(uint64_t* count, int64_t* total, int64_t* min, int64_t* max, int64_t* median) {
    *count = durs.size();
    *total = *min = *max = *median = 0;
    if (durs.empty()) return;
    for (int64_t d : durs) *total += d;
    auto [lo, hi] = std::minmax_element(durs.begin(), durs.end());
    *min = *lo;
    *max = *hi;
    std::nth_element(durs.begin(), durs.begin() + durs.size() / 2, durs.end());
    *median = durs[durs.size() / 2];
  }
};

// One NVTX range name's occurrences in the window.
struct SectionAcc {
  std::string name, parent;
  std::vector<int64_t> start_ns;
  DurationSet durs;

  void add(int64_t start, int64_t end) {
    start_ns.push_back(start);
    durs.durs.push_back(end - start);
  }
  SectionWindowStats stats(bool summaries_only, DropCounters* dropped) {
    SectionWindowStats s;
    s.name = name;
    s.parent = parent;
    std::vector<int64_t> dur = durs.durs;
    durs.fill(&s.count, &s.total_ns, &s.min_ns, &s.max_ns, &s.median_ns);
    if (summaries_only) {
      dropped->occurrences_sampled += s.count;
    } else {
      s.start_ns = std::move(start_ns);
      s.dur_ns = std::move(dur);
      s.tid.assign(s.start_ns.size(), kTid);
    }
    return s;
  }
};

class WindowBuilder {
 public:
  WindowBuilder(const Job& job, int rank) : job_(job), rank_(rank), kernel_durs_(job.kernels().size() + 1) {
    sections_.push_back({"step", "", {}, {}});
    for (const char* s : kSectionNames) sections_.push_back({s, "step", {}, {}});
  }

  void add_step(const StepTrace& t) {
    sections_[0].add(t.start_ns, t.end_ns);
    for (int s = 0; s < kSectionCount; ++s) sections_[s + 1].add(t.section_start_ns[s], t.section_end_ns[s]);
    for (const Launch& l : t.launches) add_launch(l);
    add_collective(t);
  }

  WindowSnapshot take(uint64_t index, int64_t start_ns, int64_t end_ns) {
    WindowSnapshot w;
    w.index = index;
    w.start_ns = start_ns;
    w.end_ns = end_ns;
    for (SectionAcc& s : sections_) {
      w.sections.push_back(s.stats(job_.spec().summaries_only, &w.dropped));
      s.start_ns.clear();
      s.durs.durs.clear();
    }
    w.gpu = take_gpu();
    if (job_.spec().summaries_only) {
      w.dropped.gpu_records_not_stored += w.gpu.records.size();
      w.gpu.records = {};
    }
    w.gpu_status = gpu_status();
    w.nccl = take_nccl();
    return w;
  }

 private:
  uint32_t kernel_string(int kernel) const {
    return kFirstKernelString + static_cast<uint32_t>(kernel < 0 ? job_.kernels().size() : size_t(kernel));
  }

  void add_launch(const Launch& l) {
    const bool nccl = l.kernel < 0;
    GpuRecords& r = gpu_.records;
    r.kind.push_back(static_cast<uint8_t>(GpuRecordKind::kernel));
    r.name.push_back(kernel_string(l.kernel));
    r.section.push_back(nccl ? kStepString : static_cast<uint32_t>(job_.kernels()[l.kernel].section));
    r.start_ns.push_back(l.gpu_start_ns);
    r.dur_ns.push_back(l.gpu_end_ns - l.gpu_start_ns);
    r.api_start_ns.push_back(l.api_start_ns);
    r.api_dur_ns.push_back(l.api_end_ns - l.api_start_ns);
    r.tid.push_back(kTid);
    r.correlation.push_back(++correlation_);
    r.stream.push_back(kStream);
    r.device.push_back(rank_ % job_.spec().ranks_per_host);
    r.shape.push_back(0);
    r.bytes.push_back(0);
    r.copy_kind.push_back(0);
    r.flags.push_back(nccl ? kGpuFlagNccl : 0);
    kernel_durs_[kernel_string(l.kernel) - kFirstKernelString].durs.push_back(l.gpu_end_ns - l.gpu_start_ns);
    ++gpu_.launches;
  }

  void add_collective(const StepTrace& t) {
    const Launch& l = t.launches.back();
    NcclOp op;
    op.comm = 0;
    op.func = 0;
    op.datatype = 1;
    op.algo = 2;
    op.proto = 3;
    op.seq = seq_++;
    op.count = 1u << 24;
    op.bytes = 4u << 24;
    op.nchannels = op.channels = 2;
    op.upload_start_ns = l.api_start_ns;
    op.upload_end_ns = l.api_end_ns;
    op.gpu_start = static_cast<uint64_t>(l.gpu_start_ns);  // %globaltimer: epoch ns on current drivers
    op.gpu_end = static_cast<uint64_t>(l.gpu_end_ns);
    op.chan_host_start_ns = l.gpu_start_ns + 1'000;
    op.chan_host_stop_ns = l.gpu_end_ns + 2'000;
    ops_.push_back(op);
  }

  GpuWindow take_gpu() {
    GpuWindow g = std::move(gpu_);
    gpu_ = {};
    g.present = g.sampled = true;
    for (const char* s : kSectionNames) g.strings.push_back(s);
    g.strings.push_back("step");
    for (const KernelDef& k : job_.kernels()) g.strings.push_back(k.name);
    g.strings.push_back(job_.allreduce_kernel_name());
    g.records.shapes = {{1024, 1, 1, 256, 1, 1}};
    for (size_t i = 0; i < kernel_durs_.size(); ++i) {
      GpuKernelStats k;
      const bool nccl = i == job_.kernels().size();
      k.section = nccl ? kStepString : static_cast<uint32_t>(job_.kernels()[i].section);
      k.name = kFirstKernelString + static_cast<uint32_t>(i);
      k.nccl = nccl;
      k.grid = {1024, 1, 1};
      k.block = {256, 1, 1};
      kernel_durs_[i].fill(&k.count, &k.total_ns, &k.min_ns, &k.max_ns, &k.median_ns);
      kernel_durs_[i].durs.clear();
      if (k.count) g.kernels.push_back(k);
    }
    return g;
  }

  NcclWindow take_nccl() {
    NcclWindow n;
    n.active = true;
    n.table_version = 6;
    n.inits = 1;
    n.kernel_events = "on";
    n.comms.push_back({kCommHash, "", job_.spec().ranks, rank_,
                       (job_.spec().ranks + job_.spec().ranks_per_host - 1) / job_.spec().ranks_per_host});
    n.strings = {"AllReduce", "ncclFloat32", "RING", "SIMPLE"};
    n.ops = std::move(ops_);
    ops_.clear();
    return n;
  }

  static GpuStatus gpu_status() {
    GpuStatus s;
    s.cupti = "on";
    s.library = "libcupti.so.13 (synthetic: bench/gen_synthetic)";
    s.has_clock = true;
    s.clock_uncertainty_ns = 1'000;
    return s;
  }

  const Job& job_;
  int rank_;
  std::vector<SectionAcc> sections_;
  std::vector<DurationSet> kernel_durs_;  // per kernel, the all-reduce last
  GpuWindow gpu_;
  std::vector<NcclOp> ops_;
  uint32_t correlation_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace

FileInfo file_info(const Job& job, int rank) {
  const Spec& spec = job.spec();
  FileInfo fi;
  fi.run_id = "synthetic-" + std::to_string(spec.seed);
  fi.run_id_source = "gen-synthetic";
  fi.rank = rank;
  fi.local_rank = rank % spec.ranks_per_host;
  fi.world_size = spec.ranks;
  fi.rank_source = "RANK";
  char host[32];
  std::snprintf(host, sizeof host, "node%04d", rank / spec.ranks_per_host);
  fi.host = host;
  fi.pid = 10'000 + rank;
  fi.ppid = 1;
  fi.process_start_ns = kRunStartNs - 1'000'000'000;
  fi.epoch_offset_ns = kRunStartNs - 1'000'000'000'000;
  fi.flush_s = 10;
  fi.max_occurrences = 2048;
  fi.nvtx_status = "on";
  fi.cupti_enabled = true;
  fi.profiling_interval = 1;
  fi.nccl_status = "on";
  fi.written_ns = job.run_end_ns();  // fixed: the same seed gives the same bytes
  return fi;
}

std::string write_rank(const Job& job, int rank, const std::string& run_dir, RankTotals* totals) {
  const Spec& spec = job.spec();
  const FileInfo info = file_info(job, rank);
  const int windows = (spec.steps + spec.steps_per_window - 1) / spec.steps_per_window;
  SegmentWriter writer(run_dir, info, windows);
  writer.set_format(spec.binary ? FileFormat::binary : FileFormat::json);
  WindowBuilder builder(job, rank);
  DropCounters dropped;
  int64_t window_start = info.process_start_ns;
  for (int w = 0; w < windows; ++w) {
    const int first = w * spec.steps_per_window, end = std::min(spec.steps, first + spec.steps_per_window);
    int64_t last_end = 0;
    for (int k = first; k < end; ++k) {
      StepTrace t = job.step(rank, k);
      last_end = t.end_ns;
      builder.add_step(t);
    }
    const bool final = end == spec.steps;
    const int64_t window_end = final ? last_end + kLastWindowTailNs : job.step_start_ns(rank, end);
    WindowSnapshot snap = builder.take(static_cast<uint64_t>(w), window_start, window_end);
    window_start = window_end;
    dropped += snap.dropped;
    totals->records += snap.gpu.records.size();
    ++totals->windows;
    if (std::string err = writer.write(snap, dropped, final, 0); !err.empty()) return err;
  }
  return "";
}

}  // namespace laggard::gen
