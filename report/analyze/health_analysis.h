// GPU health (NVML telemetry in the rank files, schema version 4): per rank and GPU, the
// clocks, temperature, power, throttling and ECC errors over the run, which GPUs look unhealthy
// against the others, and the link from a slow-GPU verdict finding to that evidence.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model.h"
#include "verdict.h"

namespace laggard::report {

// Reader: one window's "gpu_health" object into cw.gpu_health (ignores malformed entries).
void read_gpu_health_window(const nlohmann::json& j, CaptureWindow& cw);

struct RankGpuHealth {
  int rank = -1, device = -1;
  std::string host, uuid;
  int samples = 0;
  double sm_clock_median_mhz = 0, sm_clock_min_mhz = 0;  // median of the window medians; lowest sample
  double mem_clock_median_mhz = 0, temperature_max_c = 0, power_median_w = 0;
  double slowdown_share = 0;       // samples with a power/thermal/hardware slowdown reason
  uint64_t clocks_event_reasons = 0;
  int64_t ecc_uncorrected_new = 0;
  std::vector<std::string> problems;  // why it looks unhealthy; empty: healthy
};

struct HealthOptions {
  double low_clock = 0.9;       // SM clock median below this fraction of the ranks' median
  double slowdown_share = 0.2;  // of samples
};

struct HealthReport {
  bool present = false;
  std::vector<RankGpuHealth> gpus;  // by rank
};

HealthReport analyze_gpu_health(const RunModel& model, const HealthOptions& options = {});

// A finding of cause gpu_compute on a rank whose GPU looks unhealthy becomes cause gpu_health,
// with the telemetry as evidence.
void link_gpu_health(Verdict& verdict, const HealthReport& health);

nlohmann::json render_health_json(const HealthReport& health);
void render_health_text(const HealthReport& health, std::ostream& out);

}  // namespace laggard::report
