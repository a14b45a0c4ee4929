// Shared pieces of the end-to-end tests: paths of the built programs, a scratch directory,
// `laggard run` / `laggard report --format json` wrappers.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.h"

namespace laggard::test {

inline const std::string kBin = LAGGARD_BIN_DIR;
inline const std::string kLaggard = kBin + "/laggard";
inline const std::string kDemo = kBin + "/laggard-demo";
inline const std::string kFakeNccl = kBin + "/laggard-fake-nccl";
inline const std::string kLibrary = kBin + "/liblaggard.so";
inline const std::string kFakeCudaApp = kBin + "/laggard-fake-cuda-app";
inline const std::string kFakeCuda = kBin + "/fake-cuda/libcuda.so.1";  // fake driver + CUPTI

// Variables a developer's shell might carry into the tests; every child starts without them.
inline ProcessOptions clean_env() {
  ProcessOptions o;
  for (const char* v : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_JOB_ID", "OMPI_COMM_WORLD_RANK",
                        "PMI_RANK", "PMIX_RANK", "TORCHELASTIC_RUN_ID", "LD_PRELOAD", "NVTX_INJECTION64_PATH",
                        "LAGGARD_ENABLE", "LAGGARD_OUT", "LAGGARD_SECTIONS", "LAGGARD_FLUSH_S", "LAGGARD_LOG",
                        "LAGGARD_RANK", "LAGGARD_RUN_ID", "LAGGARD_LIB", "LAGGARD_CUPTI", "LAGGARD_CUPTI_PATH",
                        "LAGGARD_PROFILING_INTERVAL", "CUDA_INJECTION64_PATH", "LAGGARD_NCCL", "NCCL_PROFILER_PLUGIN",
                        "LAGGARD_HANG_S", "LAGGARD_HANG_REPEAT_S", "LAGGARD_HANG_SIGNAL", "LAGGARD_HANG_UNWINDER",
                        "LAGGARD_NVML", "FAKE_NVML_GPUS", "FAKE_NVML_SLOW_GPU", "FAKE_NVML_FAIL_INIT",
                        "LAGGARD_FILE_FORMAT", "LAGGARD_RUN_PREFIX", "SLURM_STEP_ID", "SLURM_STEPID",
                        "SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                        "LAGGARD_TEST_IMAGE_ID"})
    o.env[v] = std::nullopt;
  return o;
}

// The same options with LeakSanitizer's exit check off when the tests run under ASan (later options
// win; every other ASan check stays on): in a forked child it counts the memory of the threads fork
// left behind as leaked and changes the child's exit code, which the fork tests check.
inline ProcessOptions without_leak_check(ProcessOptions o) {
  if (const char* asan = std::getenv("ASAN_OPTIONS")) o.env["ASAN_OPTIONS"] = std::string(asan) + ":detect_leaks=0";
  return o;
}

// One process as rank 0 of 1 with liblaggard preloaded, writing OUT_DIR/RUN_ID/ and flushing every
// 0.1 s: what the single-process end-to-end tests start from (each adds its own settings).
inline ProcessOptions single_rank(const std::string& out_dir, const std::string& run_id) {
  ProcessOptions o = clean_env();
  o.env["LD_PRELOAD"] = kLibrary;
  o.env["RANK"] = "0";
  o.env["WORLD_SIZE"] = "1";
  o.env["LAGGARD_OUT"] = out_dir;
  o.env["LAGGARD_RUN_ID"] = run_id;
  o.env["LAGGARD_FLUSH_S"] = "0.1";
  return o;
}

// Microseconds some runnable task has waited for a CPU since boot (PSI, /proc/pressure/cpu "some");
// -1 without PSI. Its growth over a run says whether the run's processes were kept from a core.
inline long long cpu_pressure_us() {
  long long total = -1;
  if (FILE* f = std::fopen("/proc/pressure/cpu", "r")) {
    if (std::fscanf(f, "some avg10=%*f avg60=%*f avg300=%*f total=%lld", &total) != 1) total = -1;
    std::fclose(f);
  }
  return total;
}

// Any rank file (rank*.json, or binary frames in rank*.lgr, the default) as the JSON text of a
// JSON segment, through `laggard cat`: what `cat` could read, also of a file being appended to.
inline std::string rank_file_text(const std::filesystem::path& file) {
  return run_process({kLaggard, "cat", file.string()}, clean_env()).out;
}

// Any rank file as JSON (see rank_file_text); a file `cat` cannot read whole fails the test.
inline nlohmann::json rank_file_json(const std::filesystem::path& file) {
  ProcessResult r = run_process({kLaggard, "cat", file.string()}, clean_env());
  EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// Polls `ok` every 100 ms until it holds or timeout_s passes; a test waits for a condition (a file,
// a window, a scrape), never for time. The timeout only ends a test that will not pass.
inline bool wait_until(const std::function<bool()>& ok, double timeout_s = 120) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

// Whether the machine kept runnable tasks waiting for a CPU while something ran: CPU pressure grew
// by more than a tenth of its wall time (the load average lags by a minute), or, without PSI, the
// load average exceeds the cores. Sleeping processes on such a machine wake late for several steps
// at a time: true delays of ranks nothing was injected into, which the report rightly flags.
class ContentionMeter {
 public:
  ContentionMeter() : pressure_(cpu_pressure_us()), t0_(std::chrono::steady_clock::now()) {}
  bool contended() const {
    const long long pressure = cpu_pressure_us();
    const auto wall_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0_).count();
    if (pressure_ >= 0 && pressure >= 0) return pressure - pressure_ > wall_us / 10;
    double load = 0;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf", &load) != 1) load = 0;
      std::fclose(f);
    }
    return load > double(std::thread::hardware_concurrency());
  }

 private:
  long long pressure_;
  std::chrono::steady_clock::time_point t0_;
};

// A started process that is killed when the test leaves early (a failed ASSERT), never left behind.
struct Child {
  Running run;
  bool reaped = false;
  explicit Child(Running r) : run(std::move(r)) {}
  Child(const Child&) = delete;
  ~Child() {
    if (reaped) return;
    kill(run.pid, SIGKILL);
    wait_process(run, 30);
  }
  ProcessResult wait(double timeout_s = 120) {
    reaped = true;
    return wait_process(run, timeout_s);
  }
  ProcessResult stop(int sig = SIGINT) {
    kill(run.pid, sig);
    return wait(30);
  }
};

// A scratch directory per test, inside the build tree (build/test-scratch/Suite.Test-XXXXXX), never
// in /tmp: a passing test removes it; a failing one keeps it for inspection, as does a test killed
// by ctest's timeout, and the next run of that test removes what an earlier one kept.
class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(t->test_suite_name()) + "." + t->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized: "Formats/Suite.Test/json"
    const std::filesystem::path root = kBin + "/test-scratch";
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    for (auto it = std::filesystem::directory_iterator(root, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec))
      if (it->path().filename().string().rfind(name + "-", 0) == 0) std::filesystem::remove_all(it->path(), ec);
    std::string tmpl = (root / (name + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data())) FAIL() << "cannot create a scratch directory under " << root;
    dir = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (dir.empty()) return;
    if (!HasFailure()) std::filesystem::remove_all(dir, ec);
    else std::cerr << "kept " << dir << " for inspection\n";
  }
  std::string out() const { return dir + "/out"; }

  // laggard run --nproc N --flush-s F --out OUT -- laggard-demo ARGS; last_run_contended says
  // whether the machine kept runnable tasks waiting for a CPU meanwhile (ContentionMeter).
  ProcessResult run_demo(int nproc, const std::vector<std::string>& demo_args, double flush_s = 0.2) {
    std::vector<std::string> argv = {kLaggard, "run", "--nproc", std::to_string(nproc), "--flush-s",
                                     std::to_string(flush_s), "--out", out(), "--", kDemo};
    argv.insert(argv.end(), demo_args.begin(), demo_args.end());
    ContentionMeter meter;
    ProcessResult r = run_process(argv, clean_env());
    last_run_contended = meter.contended();
    return r;
  }
  bool last_run_contended = false;

  nlohmann::json report(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {kLaggard, "report", out(), "--format", "json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcessResult r = run_process(argv, clean_env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    try {
      return nlohmann::json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "report is not JSON: " << e.what() << "\n" << r.out << r.err;
      return {};
    }
  }

  std::vector<std::filesystem::path> rank_files() const {
    std::vector<std::filesystem::path> files;
    if (!std::filesystem::exists(out())) return files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(out()))
      if (e.is_regular_file()) files.push_back(e.path());
    return files;
  }

  std::string dir;
};

}  // namespace laggard::test
