// GPU capture for one process: CUPTI launch callbacks note the launching thread's NVTX section
// by correlation id; activity buffers (kernels, memcpys, memsets) are parsed as CUPTI hands them
// back and joined to those notes; each window close drains CUPTI and hands the window's
// statistics and records to the writer. Talks to CUPTI only through CuptiApi. Shares CUPTI with
// other clients in the process (shared_cupti.h, docs/cupti.md): steps aside, keeps count.
//
// Threads: launch callbacks run on the application's threads (lock-free table writes only);
// buffer callbacks on CUPTI's worker thread or inside a flush (data mutex); attach, tick and
// close_window on the activating thread or the flush thread (control mutex); another client's
// CUPTI calls on its own thread (cupti mutex, never held across a flush). No CUPTI call is made
// while the data mutex is held, so a flush that delivers buffers cannot deadlock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "buffer_pool.h"
#include "correlation_table.h"
#include "cupti_api.h"
#include "gpu_aggregator.h"
#include "shared_cupti.h"
#include "window.h"

namespace laggard::cupti {

struct GpuCaptureOptions {
  int profiling_interval = 1;       // capture in windows whose index is a multiple of this
  size_t buffer_bytes = 1u << 20;   // about 4800 kernel records each
  size_t max_buffers = 16;
  size_t table_slots = 1u << 17;    // correlation ids in flight (power of two)
  size_t records_per_window = GpuAggregator::kRecordsPerWindow;
  size_t late_windows = GpuAggregator::kLateWindows;  // closed windows late records may still go to
  int release_wait_ticks = 10;      // another client's buffers not back after this many ticks: fetched
};

// How attach was reached: from inside cuInit (CUDA_INJECTION64_PATH) or later (the flush
// thread's poll, a retry). Device-graph records can only be asked for before CUDA initializes.
enum class AttachTrigger { cuda_init, later };

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
  // registered that could call back into this object); retryable() says whether trying again
  // later may succeed (another client held CUPTI's subscriber).
  std::string attach(uint64_t open_window, AttachTrigger trigger = AttachTrigger::cuda_init);
  bool retryable() const { return retryable_; }

  // Flush thread, between windows: asks CUPTI for completed buffers, so records are joined
  // while their launch notes are fresh; subscribes again, attaches again after another client's
  // cuptiFinalize, takes the activity API back when another client left it.
  void tick();

  // Flush thread: drains CUPTI (forced on the final window), fills w.gpu, w.gpu_status and the
  // GPU drop counters, then switches capture on or off for the next window.
  void close_window(WindowSnapshot& w, bool final, const GpuAggregator::SectionName& section_name);

  // Forked child: every callback returns at once from now on (another client's buffers are
  // still handed back to it).
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
  bool subscribed() const { return has_subscriber_.load(); }
  // `laggard ctl` paused or resumed capture (pause_state.h): kernel records and launch
  // callbacks are switched off while paused and back on (in a sampled window) after.
  void apply_pause();
  const std::vector<CUpti_CallbackId>& runtime_callbacks() const { return runtime_cbids_; }
  const std::vector<CUpti_CallbackId>& driver_callbacks() const { return driver_cbids_; }

  // CUPTI's launch callback (userdata: this capture).
  static void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* data);

  // ---- called by shared_cupti.cpp (buffers, and another client's calls) ----
  // A buffer for CUPTI from laggard's pool; declined (null) only from CUPTI API version 27.
  uint8_t* buffer_for_cupti(size_t* size);
  bool owns_buffer(const uint8_t* buffer) const { return pool_.owns(buffer); }
  void own_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_size);
  // Another client's buffer on its way back to it: its kernels, copies, sets are read, not changed.
  void read_foreign_buffer(const uint8_t* buffer, size_t valid_size);
  bool routes_buffers() const { return routes_buffers_.load(std::memory_order_acquire); }
  // Another client subscribes: laggard unsubscribes first (true if it held the subscriber) ...
  bool give_subscriber();
  // ... and subscribes again if the other client was refused anyway.
  void take_subscriber_back();
  // Another client registers buffer callbacks: laggard switches off the kinds only it had on,
  // `take` routes buffers to the other client, and laggard's buffers CUPTI holds come back.
  void give_activity(const std::function<void()>& take);
  // The other client left the activity API: laggard's kinds on again (if capturing).
  void take_activity_back();
  void foreign_kind_changed(CUpti_ActivityKind kind, bool on);
  // Another client is calling cuptiFinalize: laggard's subscriber and registrations end with it.
  void cupti_finalized(const std::string& by);
  void flush_forced();

 private:
  struct Classes;  // launch callback ids -> what they put on the GPU

  void choose_callbacks();
  CUptiResult subscribe_locked(std::string* other);
  void set_subscriber_locked(CUpti_SubscriberHandle h);
  std::string set_capturing_locked(bool on);
  std::string enable_kinds_locked();
  void disable_kinds_locked();
  void enable_callbacks_locked(bool on);
  void update_flowing_locked();
  bool wants_capture(uint64_t window) const;  // sampled window and not paused
  void consume(const uint8_t* buffer, size_t valid_size, bool foreign);
  void count_missed_locked(std::vector<uint32_t>& launches, std::vector<uint32_t>& work);
  void resubscribe_if_free();
  void attach_again_after_finalize();
  ClockSync measure_clock();
  ClockCheck check_clock(const ClockSync& now);
  void note_clock_owner();
  std::string shared_note(const Tenancy& t, uint64_t missed);
  static uint64_t drop_records_of_another_clock(std::vector<GpuAggregator::Stored>& stored, const GpuClockMap& map);
  std::string starvation(uint64_t launches, uint64_t records, bool explained);
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
  std::atomic<uint64_t> launches_{0}; // launches (first API entry of a correlation id) in the open window
  std::atomic<uint64_t> missed_{0};   // ... of which no record reaches laggard (another client's kinds)
  std::atomic<uint8_t> flowing_{0};   // record classes that reach laggard now (kClass* bits)
  std::atomic<bool> routes_buffers_{false};  // laggard's buffer callbacks are registered with CUPTI
  std::atomic<bool> finalized_{false};       // another client finalized CUPTI; not attached again yet
  std::atomic<bool> capturing_now_{false};   // capturing_, for the buffer callbacks
  std::atomic<bool> has_subscriber_{false};  // subscriber_ is set, for the buffer callbacks
  std::vector<uint8_t> runtime_class_, driver_class_;  // by callback id; fixed after the first attach

  std::mutex control_mu_;  // attach, tick, close_window
  std::vector<CUpti_CallbackId> runtime_cbids_, driver_cbids_;
  bool attached_ = false, window_sampled_ = false, retryable_ = false;
  uint64_t open_window_ = 0;
  int64_t epoch_offset_ns_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC, at attach
  ClockSync clock_;
  ClockSync last_point_;          // the previous window close's measurement
  double clock_rate_ = 1.0;       // CUPTI ticks per ns in use
  double last_rate_ = 0;          // measured over the previous window (0: none)
  double boundary_rate_ = 1.0;    // the rate of the window closes the aggregator remembers
  bool changed_last_window_ = false;  // the previous window's clock check found a change
  uint64_t seen_declined_ = 0, seen_overflowed_ = 0;
  CUptiResult attach_result_ = CUPTI_SUCCESS;
  uint32_t version_ = 0;
  uint64_t seen_timestamp_callbacks_ = 0;
  std::string timestamp_owner_;
  int empty_windows_ = 0;            // consecutive sampled windows with launches but no records
  int release_ticks_ = 0;            // ticks another client's release has been pending
  std::string finalized_by_;         // set by cupti_finalized (another thread): read under cupti_mu_
  uint64_t buffers_lost_ = 0;        // laggard's buffers CUPTI held when it was finalized

  mutable std::mutex cupti_mu_;  // subscriber, kinds, capturing_: never held across a flush
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool capturing_ = false;
  KindSet own_on_;                // kinds laggard switched on (and must switch off)
  bool foreign_this_window_ = false;    // another client held the activity API during the window
  bool unattributed_this_window_ = false;  // laggard had no subscriber during the window
  bool finalized_this_window_ = false;

  std::mutex data_mu_;  // aggregator and the counters below
  GpuAggregator agg_;
  uint64_t no_timestamp_ = 0;
  std::vector<uint32_t> previous_work_;  // correlation ids of the last foreign buffer's records (sorted)
  std::atomic<uint64_t> cupti_dropped_{0};
  uint64_t seen_cupti_dropped_ = 0;
};

}  // namespace laggard::cupti
