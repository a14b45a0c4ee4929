// Shared pieces of the end-to-end tests: paths of the built programs, a scratch directory,
// `laggard run` / `laggard report --format json` wrappers.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
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

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/laggard-it-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir);
    else std::cerr << "kept " << dir << " for inspection\n";
  }
  std::string out() const { return dir + "/out"; }

  // laggard run --nproc N --flush-s F --out OUT -- laggard-demo ARGS
  ProcessResult run_demo(int nproc, const std::vector<std::string>& demo_args, double flush_s = 0.2) {
    std::vector<std::string> argv = {kLaggard, "run", "--nproc", std::to_string(nproc), "--flush-s",
                                     std::to_string(flush_s), "--out", out(), "--", kDemo};
    argv.insert(argv.end(), demo_args.begin(), demo_args.end());
    return run_process(argv, clean_env());
  }

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
