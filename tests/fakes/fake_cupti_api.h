// FakeCuptiCore behind laggard's CuptiApi interface, for in-process unit tests.
#pragma once

#include "cupti_api.h"
#include "fake_cupti_core.h"

namespace laggard::fake {

class FakeCupti final : public cupti::CuptiApi {
 public:
  FakeCuptiCore core;

  CUptiResult subscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) override {
    return core.subscribe(s, cb, ud);
  }
  CUptiResult unsubscribe(CUpti_SubscriberHandle s) override { return core.unsubscribe(s); }
  CUptiResult enable_callback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                              CUpti_CallbackId id) override {
    return core.enable_callback(en, s, d, id);
  }
  CUptiResult callback_name(CUpti_CallbackDomain d, uint32_t id, const char** n) override {
    return core.callback_name(d, id, n);
  }
  CUptiResult register_buffers(CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc done) override {
    return core.register_buffers(rq, done);
  }
  CUptiResult enable_kind(CUpti_ActivityKind k) override { return core.enable_kind(k); }
  CUptiResult disable_kind(CUpti_ActivityKind k) override { return core.disable_kind(k); }
  CUptiResult flush_all(uint32_t flag) override { return core.flush_all(flag); }
  CUptiResult next_record(uint8_t* b, size_t n, CUpti_Activity** r) override {
    return FakeCuptiCore::next_record(b, n, r);
  }
  CUptiResult dropped_records(CUcontext c, uint32_t s, size_t* n) override { return core.dropped_records(c, s, n); }
  CUptiResult timestamp(uint64_t* ns) override { return core.timestamp(ns); }
  CUptiResult subscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud,
                           CUpti_SubscriberParams* p) override {
    return core.have_subscribe_v2 ? core.subscribe_v2(s, cb, ud, p) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  CUptiResult version(uint32_t* v) override { return core.get_version(v); }
  CUptiResult enable_device_graph(uint8_t en) override { return core.enable_device_graph(en); }
  std::string error_string(CUptiResult r) override { return "fake error " + std::to_string(int(r)); }
  std::string describe() const override { return "fake-cupti"; }
};

}  // namespace laggard::fake
