// dlopen/dlsym implementation of CuptiApi. Required functions missing means "not a usable
// CUPTI" and the next candidate is tried; optional ones (cuptiGetCallbackName) degrade.
#include "cupti_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstring>

namespace laggard::cupti {
namespace {

struct Fns {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;  // optional
  decltype(&cuptiActivityRegisterCallbacks) register_buffers = nullptr;
  decltype(&cuptiActivityEnable) enable_kind = nullptr;
  decltype(&cuptiActivityDisable) disable_kind = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;  // optional
};

class DlCupti final : public CuptiApi {
 public:
  DlCupti(void* handle, Fns f, std::string path) : handle_(handle), f_(f), path_(std::move(path)) {}
  // The handle is never closed: CUPTI may call back into us until the process ends.

  CUptiResult subscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) override {
    return f_.subscribe(s, cb, ud);
  }
  CUptiResult unsubscribe(CUpti_SubscriberHandle s) override { return f_.unsubscribe(s); }
  CUptiResult enable_callback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                              CUpti_CallbackId id) override {
    return f_.enable_callback(en, s, d, id);
  }
  CUptiResult callback_name(CUpti_CallbackDomain d, uint32_t id, const char** name) override {
    return f_.callback_name ? f_.callback_name(d, id, name) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  CUptiResult register_buffers(CUpti_BuffersCallbackRequestFunc rq,
                               CUpti_BuffersCallbackCompleteFunc done) override {
    return f_.register_buffers(rq, done);
  }
  CUptiResult enable_kind(CUpti_ActivityKind k) override { return f_.enable_kind(k); }
  CUptiResult disable_kind(CUpti_ActivityKind k) override { return f_.disable_kind(k); }
  CUptiResult flush_all(uint32_t flag) override { return f_.flush_all(flag); }
  CUptiResult next_record(uint8_t* b, size_t n, CUpti_Activity** r) override { return f_.next_record(b, n, r); }
  CUptiResult dropped_records(CUcontext c, uint32_t s, size_t* n) override { return f_.dropped_records(c, s, n); }
  CUptiResult timestamp(uint64_t* ns) override { return f_.timestamp(ns); }
  std::string error_string(CUptiResult r) override {
    const char* s = nullptr;
    if (f_.result_string && f_.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }
  std::string describe() const override { return path_; }

 private:
  void* handle_;
  Fns f_;
  std::string path_;
};

template <class F>
bool sym(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}

// Empty string when every required function is there, else the first one missing.
std::string resolve(void* h, Fns* f) {
  const char* missing = nullptr;
  auto need = [&](const char* name, auto* slot) {
    if (!sym(h, name, slot) && !missing) missing = name;
  };
  need("cuptiSubscribe", &f->subscribe);
  need("cuptiUnsubscribe", &f->unsubscribe);
  need("cuptiEnableCallback", &f->enable_callback);
  need("cuptiActivityRegisterCallbacks", &f->register_buffers);
  need("cuptiActivityEnable", &f->enable_kind);
  need("cuptiActivityDisable", &f->disable_kind);
  need("cuptiActivityFlushAll", &f->flush_all);
  need("cuptiActivityGetNextRecord", &f->next_record);
  need("cuptiActivityGetNumDroppedRecords", &f->dropped_records);
  need("cuptiGetTimestamp", &f->timestamp);
  sym(h, "cuptiGetCallbackName", &f->callback_name);
  sym(h, "cuptiGetResultString", &f->result_string);
  return missing ? missing : "";
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

constexpr const char* kNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};

void add_dir(std::vector<std::string>& out, const std::string& dir) {
  if (dir.empty()) return;
  for (const char* n : kNames) out.push_back(dir + "/" + n);
}

std::string loaded_path(void* handle, const std::string& fallback) {
  // dlinfo would need _GNU_SOURCE link maps; dladdr on a resolved symbol names the file.
  void* fn = dlsym(handle, "cuptiGetTimestamp");
  Dl_info info{};
  if (fn && dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace

std::vector<std::string> cupti_candidates(const LoaderOptions& o) {
  std::vector<std::string> out;
  if (!o.explicit_path.empty()) {
    if (is_dir(o.explicit_path)) add_dir(out, o.explicit_path);
    else out.push_back(o.explicit_path);
    return out;
  }
  if (!o.cuda_home.empty()) {
    add_dir(out, o.cuda_home + "/lib64");
    add_dir(out, o.cuda_home + "/extras/CUPTI/lib64");
  }
  add_dir(out, "/usr/local/cuda/lib64");
  add_dir(out, "/usr/local/cuda/extras/CUPTI/lib64");
  for (const char* n : kNames) out.push_back(n);  // LD_LIBRARY_PATH, ldconfig cache
  return out;
}

LoadResult load_cupti(const LoaderOptions& o) {
  LoadResult res;
  std::string tried;
  auto attempt = [&](const std::string& what, int flags) -> bool {
    void* h = dlopen(what.c_str(), flags);
    if (!h) {
      if (!(flags & RTLD_NOLOAD)) {
        const char* e = dlerror();
        tried += (tried.empty() ? "" : "; ") + what + (e && std::strstr(e, "No such file") ? ": not found" : "");
      }
      return false;
    }
    Fns f;
    std::string missing = resolve(h, &f);
    if (!missing.empty()) {
      tried += (tried.empty() ? "" : "; ") + what + ": no " + missing;
      return false;  // not closed: harmless, and a library CUPTI also uses may sit behind it
    }
    res.api = std::make_unique<DlCupti>(h, f, loaded_path(h, what));
    return true;
  };
  if (o.explicit_path.empty())
    for (const char* n : kNames)
      if (attempt(n, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return res;
  for (const std::string& c : cupti_candidates(o))
    if (attempt(c, RTLD_NOW | RTLD_LOCAL)) return res;
  res.error = "libcupti not found or unusable (tried " + tried + ")";
  return res;
}

bool cuda_initialized() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) return false;
  using GetCount = int (*)(int*);
  auto get_count = reinterpret_cast<GetCount>(dlsym(h, "cuDeviceGetCount"));
  // Before cuInit every driver call but cuInit/cuDriverGetVersion answers
  // CUDA_ERROR_NOT_INITIALIZED without side effects.
  int n = 0;
  bool ok = get_count && get_count(&n) == 0 && n > 0;
  dlclose(h);  // balances the reference NOLOAD took; the driver stays loaded
  return ok;
}

}  // namespace laggard::cupti
