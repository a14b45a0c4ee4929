// The CUPTI calls laggard makes, behind an interface: the real one is loaded with dlopen at run
// time (cupti_loader.h), tests drive a fake. Types come from the CUPTI headers (build time only).
#pragma once

#include <cupti.h>

#include <memory>
#include <string>

namespace laggard::cupti {

class CuptiApi {
 public:
  virtual ~CuptiApi() = default;

  virtual CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                void* userdata) = 0;
  virtual CUptiResult unsubscribe(CUpti_SubscriberHandle subscriber) = 0;
  virtual CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                      CUpti_CallbackDomain domain, CUpti_CallbackId cbid) = 0;
  // CUPTI_ERROR_NOT_SUPPORTED when this CUPTI has no cuptiGetCallbackName.
  virtual CUptiResult callback_name(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) = 0;

  virtual CUptiResult register_buffers(CUpti_BuffersCallbackRequestFunc requested,
                                       CUpti_BuffersCallbackCompleteFunc completed) = 0;
  virtual CUptiResult enable_kind(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult disable_kind(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult flush_all(uint32_t flag) = 0;
  virtual CUptiResult next_record(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) = 0;
  virtual CUptiResult dropped_records(CUcontext context, uint32_t stream, size_t* dropped) = 0;
  virtual CUptiResult timestamp(uint64_t* ns) = 0;

  // CUDA 13.0 additions; CUPTI_ERROR_NOT_SUPPORTED when this CUPTI lacks them.
  // cupti_callbacks.h: names this subscriber, and names the other one when refused.
  virtual CUptiResult subscribe_v2(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*) {
    return CUPTI_ERROR_NOT_SUPPORTED;
  }
  virtual CUptiResult version(uint32_t*) { return CUPTI_ERROR_NOT_SUPPORTED; }   // cuptiGetVersion
  virtual CUptiResult enable_device_graph(uint8_t) { return CUPTI_ERROR_NOT_SUPPORTED; }

  virtual std::string error_string(CUptiResult result) = 0;
  // What was loaded, for the file header (e.g. the library path).
  virtual std::string describe() const = 0;
};

}  // namespace laggard::cupti
