#include "gpu_health_json.h"

namespace laggard {
namespace {

void stat(JsonOut& j, const char* key, const HealthStat& s) {
  j.key(key);
  if (!s.present) {
    j.null();
    return;
  }
  j.begin_object().field("min", s.min).field("median", s.median).field("max", s.max).end_object();
}

}  // namespace

void render_gpu_health(JsonOut& j, const GpuHealthWindow& w) {
  j.key("gpu_health").begin_object().key("devices").begin_array();
  for (const GpuHealthDevice& d : w.devices) {
    j.begin_object().field("index", d.index).field("uuid", d.uuid).field("samples", d.samples);
    stat(j, "sm_clock_mhz", d.sm_clock_mhz);
    stat(j, "mem_clock_mhz", d.mem_clock_mhz);
    stat(j, "temperature_c", d.temperature_c);
    stat(j, "power_w", d.power_w);
    j.field("clocks_event_reasons", d.reasons_seen).field("slowdown_samples", d.slowdown_samples);
    j.key("ecc_uncorrected");
    if (d.ecc_uncorrected >= 0) j.value(d.ecc_uncorrected); else j.null();
    j.field("ecc_uncorrected_new", d.ecc_uncorrected_new).end_object();
  }
  j.end_array().end_object();
}

}  // namespace laggard
