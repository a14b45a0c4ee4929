#include "activity_watch.h"

#include <mutex>

namespace laggard::cupti {
namespace {

struct Watch {
  std::mutex mu;  // calls are rare (a profiler starting or stopping): a mutex is fine
  ForeignActivity notes;
};

Watch& watch() {
  static auto* w = new Watch();  // never destroyed: interposed calls may come during exit
  return *w;
}

std::string name_or(const char* caller) { return caller && *caller ? caller : "another CUPTI client"; }

}  // namespace

ForeignActivity foreign_activity() {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.notes;
}

void note_register_callbacks(const char* caller) {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  ++w.notes.takes;
  w.notes.taker = name_or(caller);
  w.notes.holding = true;
}

void note_disable(CUpti_ActivityKind kind, const char*) {
  if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL) return;
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.notes.holding) return;
  w.notes.holding = false;
  ++w.notes.releases;
}

void note_timestamp_callback(const char* caller) {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  ++w.notes.timestamp_callbacks;
  w.notes.timestamp_owner = name_or(caller);
}

void reset_foreign_activity() {
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.notes = ForeignActivity{};
  w.notes.holding = false;
}

}  // namespace laggard::cupti
