// GPU capture for one process: CUPTI launch callbacks note the launching thread's NVTX section
// by correlation id; activity buffers (kernels, memcpys, memsets) are parsed as CUPTI hands them
// back and joined to those notes; each window close drains CUPTI and hands the window's
// statistics and records to the writer. Talks to CUPTI only through CuptiApi.
//
// Threads: launch callbacks run on the application's threads (lock-free table writes only);
// buffer callbacks on CUPTI's worker thread or inside flush_all (data mutex); attach, tick and
// close_window on the activating thread or the flush thread (control mutex). No CUPTI call is
// made while the data mutex is held, so a flush that delivers buffers cannot deadlock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "buffer_pool.h"
#include "correlation_table.h"
#include "cupti_api.h"
#include "gpu_aggregator.h"
#include "window.h"

namespace laggard::cupti {

struct GpuCaptureOptions {
  int profiling_interval = 1;       // capture in windows whose index is a multiple of this
  size_t buffer_bytes = 1u << 20;   // about 4800 kernel records each
  size_t max_buffers = 16;
  size_t table_slots = 1u << 17;    // correlation ids in flight (power of two)
  size_t records_per_window = GpuAggregator::kRecordsPerWindow;
  size_t late_windows = GpuAggregator::kLateWindows;  // closed windows late records may still go to
};

// Clock pairing of CUPTI timestamps with the host epoch clock (see docs/schema.md, "Clocks").
struct ClockSync {
  int64_t gpu_to_epoch_ns = 0;  // epoch ns = CUPTI timestamp + this
  int64_t uncertainty_ns = 0;   // width of the tightest bracket
  int64_t epoch_ns = 0;         // the bracket's middle, host epoch ns ...
  uint64_t gpu = 0;             // ... and the CUPTI timestamp read there (0: no measurement)
};

// CUPTI timestamps measured against the host clock at successive window closes: nanoseconds
// run at 1 tick per ns; a timestamp callback returning cycles (Kineto's TSC) does not.
struct ClockCheck {
  static constexpr double kTolerance = 1e-3;  // NTP slews at most 500 ppm
  double ticks_per_ns = 1.0;                   // the rate in use for conversion
  std::string problem;                         // set when this window's times are unreliable
  std::string note;                            // a change worth one log line
};

class GpuCapture {
 public:
  using SectionFn = uint32_t (*)();  // innermost open NVTX section of the calling thread

  GpuCapture(CuptiApi& api, GpuCaptureOptions options, SectionFn section);
  ~GpuCapture();
  GpuCapture(const GpuCapture&) = delete;
  GpuCapture& operator=(const GpuCapture&) = delete;

  // Subscribes to launch callbacks, registers buffers and switches capture on if window
  // `open_window` is sampled. Returns "" or why capture could not start (then nothing stays
  // registered that could call back into this object).
  std::string attach(uint64_t open_window);

  // Flush thread, between windows: asks CUPTI for completed buffers, so records are joined
  // while their launch notes are fresh.
  void tick();

  // Flush thread: drains CUPTI (forced on the final window), fills w.gpu, w.gpu_status and the
  // GPU drop counters, then switches capture on or off for the next window.
  void close_window(WindowSnapshot& w, bool final, const GpuAggregator::SectionName& section_name);

  // Forked child: every callback returns at once from now on.
  void make_inert() { inert_.store(true, std::memory_order_relaxed); }

  // Process exit: from now on this capture makes no CUPTI call. Returns false when a CUPTI call
  // is still under way after `wait_ns` (a stuck flush thread): CUPTI must not be torn down then.
  bool close_for_exit(int64_t wait_ns);

  // Why attach failed with the CUPTI result it failed on (CUPTI_ERROR_NOT_INITIALIZED: this
  // libcupti does not work with this driver; try another).
  CUptiResult attach_result() const { return attach_result_; }
  uint32_t cupti_version() const { return version_; }

  bool attached() const { return attached_; }
  bool capturing() const { return capturing_; }
  // `laggard ctl` paused or resumed capture (pause_state.h): kernel records and launch
  // callbacks are switched off while paused and back on (in a sampled window) after.
  void apply_pause();
  const std::vector<CUpti_CallbackId>& runtime_callbacks() const { return runtime_cbids_; }
  const std::vector<CUpti_CallbackId>& driver_callbacks() const { return driver_cbids_; }

  // CUPTI entry points (static: the buffer callbacks carry no user data).
  static void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* data);
  static void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                          size_t valid_size);

 private:
  void choose_callbacks();
  std::string subscribe();
  std::string set_capturing(bool on);
  bool wants_capture(uint64_t window) const;  // sampled window and not paused
  void enable_kinds();
  void consume(uint8_t* buffer, size_t valid_size);
  ClockSync measure_clock();
  ClockCheck check_clock(const ClockSync& now);
  void watch_other_clients();
  std::string starvation(uint64_t launches, uint64_t records);
  bool enter_cupti();
  void leave_cupti() { in_cupti_.fetch_sub(1, std::memory_order_acq_rel); }

  CuptiApi& api_;
  const GpuCaptureOptions opt_;
  const SectionFn section_;
  CorrelationTable table_;
  BufferPool pool_;
  std::atomic<bool> inert_{false};
  std::atomic<bool> closed_{false};   // process exit: no more CUPTI calls
  std::atomic<int> in_cupti_{0};      // CUPTI calls under way from attach/tick/close_window
  std::atomic<uint64_t> launches_{0}; // launch callbacks (API enter) in the open window

  std::mutex control_mu_;  // attach, tick, close_window
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_CallbackId> runtime_cbids_, driver_cbids_;
  bool attached_ = false, capturing_ = false, window_sampled_ = false;
  uint64_t open_window_ = 0;
  int64_t epoch_offset_ns_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC, at attach
  ClockSync clock_;
  ClockSync last_point_;          // the previous window close's measurement
  double clock_rate_ = 1.0;       // CUPTI ticks per ns in use
  double last_rate_ = 0;          // measured over the previous window (0: none)
  double boundary_rate_ = 1.0;    // the rate of the window closes the aggregator remembers
  bool changed_last_window_ = false;  // the previous window's clock check found a change
  uint64_t seen_declined_ = 0;
  CUptiResult attach_result_ = CUPTI_SUCCESS;
  uint32_t version_ = 0;
  // Other CUPTI clients (activity_watch.h).
  uint64_t seen_takes_ = 0, seen_timestamp_callbacks_ = 0;
  bool foreign_holds_ = false;       // another client's buffers are registered
  bool held_this_window_ = false;    // ... at some point during the open window
  std::string taker_, timestamp_owner_;
  int empty_windows_ = 0;            // consecutive sampled windows with launches but no records

  std::mutex data_mu_;  // aggregator and the counters below
  GpuAggregator agg_;
  uint64_t no_timestamp_ = 0;
  std::atomic<uint64_t> cupti_dropped_{0};
  uint64_t seen_cupti_dropped_ = 0;
};

}  // namespace laggard::cupti
