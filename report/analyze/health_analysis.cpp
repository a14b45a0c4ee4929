#include "health_analysis.h"

#include <algorithm>

#include <fmt/format.h>

#include "stats.h"

namespace laggard::report {
using nlohmann::json;

namespace {

HealthRange read_range(const json& j, const char* key) {
  HealthRange r;
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return r;
  r.min = it->value("min", 0.0);
  r.median = it->value("median", 0.0);
  r.max = it->value("max", 0.0);
  r.present = true;
  return r;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string reason_names(uint64_t bits) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x4, "sw_power_cap"}, {0x8, "hw_slowdown"}, {0x20, "sw_thermal"}, {0x40, "hw_thermal"}, {0x80, "hw_power_brake"}};
  std::string s;
  for (auto [bit, name] : kNames)
    if (bits & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

constexpr uint64_t kSlowdownBits = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

}  // namespace

void read_gpu_health_window(const json& j, CaptureWindow& cw) {
  auto devices = j.find("devices");
  if (devices == j.end() || !devices->is_array()) return;
  for (const json& d : *devices) {
    if (!d.is_object()) continue;
    try {
      GpuHealthSample s;
      s.device = d.value("index", -1);
      s.uuid = d.value("uuid", "");
      s.samples = d.value("samples", 0);
      s.sm_clock_mhz = read_range(d, "sm_clock_mhz");
      s.mem_clock_mhz = read_range(d, "mem_clock_mhz");
      s.temperature_c = read_range(d, "temperature_c");
      s.power_w = read_range(d, "power_w");
      s.clocks_event_reasons = d.value("clocks_event_reasons", uint64_t{0});
      s.slowdown_samples = d.value("slowdown_samples", 0);
      if (auto e = d.find("ecc_uncorrected"); e != d.end() && e->is_number_integer()) s.ecc_uncorrected = e->get<int64_t>();
      s.ecc_uncorrected_new = d.value("ecc_uncorrected_new", int64_t{0});
      cw.gpu_health.push_back(std::move(s));
    } catch (const json::exception&) {
      // a malformed entry is skipped; the window's other data stays
    }
  }
}

HealthReport analyze_gpu_health(const RunModel& model, const HealthOptions& o) {
  HealthReport h;
  for (const RankData& r : model.ranks) {
    std::map<int, RankGpuHealth> by_device;
    std::map<int, std::vector<double>> sm, mem, power;
    for (const CaptureWindow& w : r.windows)
      for (const GpuHealthSample& s : w.gpu_health) {
        RankGpuHealth& g = by_device[s.device];
        if (g.rank < 0) {
          g.rank = r.rank;
          g.host = r.host;
          g.device = s.device;
          g.uuid = s.uuid;
          g.sm_clock_min_mhz = s.sm_clock_mhz.present ? s.sm_clock_mhz.min : 0;
        }
        g.samples += s.samples;
        if (s.sm_clock_mhz.present) {
          sm[s.device].push_back(s.sm_clock_mhz.median);
          g.sm_clock_min_mhz = std::min(g.sm_clock_min_mhz, s.sm_clock_mhz.min);
        }
        if (s.mem_clock_mhz.present) mem[s.device].push_back(s.mem_clock_mhz.median);
        if (s.power_w.present) power[s.device].push_back(s.power_w.median);
        if (s.temperature_c.present) g.temperature_max_c = std::max(g.temperature_max_c, s.temperature_c.max);
        g.clocks_event_reasons |= s.clocks_event_reasons;
        g.slowdown_share += s.slowdown_samples;  // a count until divided below
        g.ecc_uncorrected_new += s.ecc_uncorrected_new;
      }
    for (auto& [device, g] : by_device) {
      g.sm_clock_median_mhz = median_of(sm[device]);
      g.mem_clock_median_mhz = median_of(mem[device]);
      g.power_median_w = median_of(power[device]);
      g.slowdown_share = g.samples ? g.slowdown_share / g.samples : 0;
      h.gpus.push_back(std::move(g));
    }
  }
  h.present = !h.gpus.empty();
  std::vector<double> clocks;
  for (const RankGpuHealth& g : h.gpus)
    if (g.sm_clock_median_mhz > 0) clocks.push_back(g.sm_clock_median_mhz);
  double typical = median_of(clocks);
  for (RankGpuHealth& g : h.gpus) {
    if (clocks.size() >= 2 && g.sm_clock_median_mhz > 0 && g.sm_clock_median_mhz < o.low_clock * typical)
      g.problems.push_back(fmt::format("SM clock {:.0f} MHz against {:.0f} MHz typical", g.sm_clock_median_mhz, typical));
    if (g.slowdown_share >= o.slowdown_share)
      g.problems.push_back(fmt::format("throttled in {:.0f}% of samples ({})", 100 * g.slowdown_share,
                                       reason_names(g.clocks_event_reasons & kSlowdownBits)));
    if (g.ecc_uncorrected_new > 0)
      g.problems.push_back(fmt::format("{} new uncorrected ECC errors", g.ecc_uncorrected_new));
  }
  return h;
}

void link_gpu_health(Verdict& verdict, const HealthReport& health) {
  for (Finding& f : verdict.findings) {
    if (f.cause != Cause::gpu_compute) continue;
    for (const RankGpuHealth& g : health.gpus) {
      if (g.rank != f.rank || g.problems.empty()) continue;
      f.cause = Cause::gpu_health;
      f.evidence["sm_clock_median_mhz"] = g.sm_clock_median_mhz;
      f.evidence["sm_clock_min_mhz"] = g.sm_clock_min_mhz;
      f.evidence["temperature_max_c"] = g.temperature_max_c;
      f.evidence["power_median_w"] = g.power_median_w;
      f.evidence["slowdown_share"] = g.slowdown_share;
      f.evidence["ecc_uncorrected_new"] = static_cast<double>(g.ecc_uncorrected_new);
      std::string why;
      for (const std::string& p : g.problems) why += (why.empty() ? "" : "; ") + p;
      f.summary += fmt::format(" GPU {} health: {}.", g.device, why);
      break;
    }
  }
}

json render_health_json(const HealthReport& h) {
  if (!h.present) return nullptr;
  json out = json::array();
  for (const RankGpuHealth& g : h.gpus)
    out.push_back({{"rank", g.rank}, {"host", g.host}, {"device", g.device}, {"uuid", g.uuid}, {"samples", g.samples},
                   {"sm_clock_median_mhz", g.sm_clock_median_mhz}, {"sm_clock_min_mhz", g.sm_clock_min_mhz},
                   {"mem_clock_median_mhz", g.mem_clock_median_mhz}, {"temperature_max_c", g.temperature_max_c},
                   {"power_median_w", g.power_median_w}, {"slowdown_share", g.slowdown_share},
                   {"clocks_event_reasons", g.clocks_event_reasons}, {"ecc_uncorrected_new", g.ecc_uncorrected_new},
                   {"problems", g.problems}});
  return out;
}

void render_health_text(const HealthReport& h, std::ostream& out) {
  if (!h.present) return;
  out << "\nGPU health (NVML, per rank's GPU over the run):\n";
  out << fmt::format("  {:>5} {:>4} {:>10} {:>10} {:>8} {:>8} {:>9} {:>6}  {}\n", "rank", "gpu", "SM MHz", "SM min",
                     "max C", "W", "throttled", "ECC+", "problems");
  for (const RankGpuHealth& g : h.gpus) {
    std::string why;
    for (const std::string& p : g.problems) why += (why.empty() ? "" : "; ") + p;
    out << fmt::format("  {:>5} {:>4} {:>10.0f} {:>10.0f} {:>8.0f} {:>8.0f} {:>8.0f}% {:>6}  {}\n", g.rank, g.device,
                       g.sm_clock_median_mhz, g.sm_clock_min_mhz, g.temperature_max_c, g.power_median_w,
                       100 * g.slowdown_share, g.ecc_uncorrected_new, why.empty() ? "-" : why);
  }
}

}  // namespace laggard::report
