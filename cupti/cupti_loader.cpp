// dlopen/dlsym implementation of CuptiApi. Required functions missing means "not a usable
// CUPTI" and the next candidate is tried; optional ones (cuptiGetCallbackName) degrade.
#include "cupti_loader.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "fork_gate.h"

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
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;      // optional (CUDA 13.0)
  decltype(&cuptiGetVersion) version = nullptr;              // optional
  decltype(&cuptiActivityEnableDeviceGraph) device_graph = nullptr;  // optional (CUDA 12.3)
};

class DlCupti final : public CuptiApi {
 public:
  DlCupti(Fns f, std::string path) : f_(f), path_(std::move(path)) {}
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
  CUptiResult subscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud,
                           CUpti_SubscriberParams* p) override {
    return f_.subscribe_v2 ? f_.subscribe_v2(s, cb, ud, p) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  CUptiResult version(uint32_t* v) override { return f_.version ? f_.version(v) : CUPTI_ERROR_NOT_SUPPORTED; }
  CUptiResult enable_device_graph(uint8_t en) override {
    return f_.device_graph ? f_.device_graph(en) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  std::string error_string(CUptiResult r) override {
    const char* s = nullptr;
    if (f_.result_string && f_.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }
  std::string describe() const override { return path_; }

 private:
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
  sym(h, "cuptiSubscribe_v2", &f->subscribe_v2);
  sym(h, "cuptiGetVersion", &f->version);
  sym(h, "cuptiActivityEnableDeviceGraph", &f->device_graph);
  return missing ? missing : "";
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// CUPTI sonames laggard knows, newest first (the soname carries the CUDA major version).
constexpr int kMajors[] = {13, 12, 11};

void add_dir(std::vector<std::string>& out, const std::string& dir, const std::vector<std::string>& names) {
  if (dir.empty()) return;
  for (const std::string& n : names) {
    std::string p = dir + "/" + n;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct LoadedObjects {
  std::vector<std::string> paths;
  unsigned long long adds = 0;
};

int collect_object(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<LoadedObjects*>(data);
  out->adds = info->dlpi_adds;
  if (info->dlpi_name && *info->dlpi_name) out->paths.emplace_back(info->dlpi_name);
  return 0;
}

LoadedObjects loaded_objects() {
  LoadedObjects out;
  ForkGate no_fork_while;  // fork_gate.h: fork leaves dl_iterate_phdr's lock held in the child
  dl_iterate_phdr(&collect_object, &out);
  return out;
}

// pip wheels install CUDA libraries as site-packages/nvidia/<package>/lib (cuda_cupti,
// cuda_runtime, ... for CUDA 12; cu13 for CUDA 13).
void add_wheel_dirs(const std::string& site_packages, std::vector<std::string>& out) {
  glob_t g{};
  std::string pattern = site_packages + "/nvidia/*/lib";
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (std::find(out.begin(), out.end(), g.gl_pathv[i]) == out.end()) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
}

std::string loaded_path(void* handle, const std::string& fallback) {
  // dlinfo would need _GNU_SOURCE link maps; dladdr on a resolved symbol names the file.
  void* fn = dlsym(handle, "cuptiGetTimestamp");
  Dl_info info{};
  if (fn && dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace

// "dir/{a,b}" for files of one directory, in order of first appearance; bare names (the loader's
// search path) as "{a,b} on the loader's search path".
static std::string group_by_directory(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& p : paths) {
    std::string d = dir_of(p), b = base_of(p);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d; });
    if (it == groups.end()) groups.push_back({d, {b}});
    else it->second.push_back(b);
  }
  std::string out;
  for (const auto& [dir, names] : groups) {
    std::string list = names.size() == 1 ? names[0] : "{" + names[0];
    for (size_t i = 1; i < names.size(); ++i) list += "," + names[i];
    if (names.size() > 1) list += "}";
    out += (out.empty() ? "" : ", ") + (dir.empty() ? list + " on the loader's search path" : dir + "/" + list);
  }
  return out;
}

// CUDA 11's CUPTI carries the minor version in its soname (libcupti.so.11.8, a cu118 wheel's
// nvidia/cuda_cupti/lib/libcupti.so.11.8); from CUDA 12 on the soname is the major alone.
static std::vector<std::string> sonames_of_major(int major, int driver_version) {
  if (major != 11) return {"libcupti.so." + std::to_string(major)};
  std::vector<int> minors;
  const int driver_minor = driver_version / 1000 == 11 ? driver_version % 1000 / 10 : 8;
  for (int m = std::min(driver_minor, 8); m >= 0; --m) minors.push_back(m);  // what the driver supports first
  for (int m = driver_minor + 1; m <= 8; ++m) minors.push_back(m);
  std::vector<std::string> out;
  for (int m : minors) out.push_back("libcupti.so.11." + std::to_string(m));
  return out;
}

std::vector<std::string> cupti_sonames(int driver_version) {
  int driver_major = driver_version / 1000;
  std::vector<std::string> out;
  auto add = [&](int major) {
    for (std::string& n : sonames_of_major(major, driver_version)) out.push_back(std::move(n));
  };
  for (int m : kMajors)
    if (driver_major == 0 || m <= driver_major) add(m);  // what the driver supports, newest first
  for (int m : kMajors)
    if (driver_major != 0 && m > driver_major) add(m);   // newer: will most likely refuse
  out.push_back("libcupti.so");
  return out;
}

void discover_loaded(LoaderOptions& o) {
  if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    // cuDriverGetVersion works before cuInit and initializes nothing.
    using GetVersion = int (*)(int*);
    auto get = reinterpret_cast<GetVersion>(dlsym(h, "cuDriverGetVersion"));
    int v = 0;
    if (get && get(&v) == 0) o.driver_version = v;
    dlclose(h);  // balances NOLOAD's reference
  }
  for (const std::string& p : loaded_objects().paths) {
    if (base_of(p).rfind("libcudart.so", 0) == 0) {
      std::string d = dir_of(p);
      if (std::find(o.cudart_dirs.begin(), o.cudart_dirs.end(), d) == o.cudart_dirs.end()) o.cudart_dirs.push_back(d);
    }
    size_t sp = p.find("/site-packages/");
    if (sp == std::string::npos) sp = p.find("/dist-packages/");
    if (sp != std::string::npos) add_wheel_dirs(p.substr(0, sp + 14), o.wheel_dirs);
  }
}

std::vector<std::string> cupti_candidates(const LoaderOptions& o) {
  std::vector<std::string> names = cupti_sonames(o.driver_version);
  std::vector<std::string> out;
  if (!o.explicit_path.empty()) {
    if (is_dir(o.explicit_path)) add_dir(out, o.explicit_path, names);
    else out.push_back(o.explicit_path);
    return out;
  }
  for (const std::string& d : o.cudart_dirs) {
    add_dir(out, d, names);                        // toolkit layout: lib64/ holds both
    add_dir(out, d + "/../extras/CUPTI/lib64", names);
    add_dir(out, d + "/../../cuda_cupti/lib", names);  // wheel layout: nvidia/cuda_runtime/lib
  }
  for (const std::string& d : o.wheel_dirs) add_dir(out, d, names);
  if (!o.cuda_home.empty()) {
    add_dir(out, o.cuda_home + "/lib64", names);
    add_dir(out, o.cuda_home + "/extras/CUPTI/lib64", names);
  }
  add_dir(out, "/usr/local/cuda/lib64", names);
  add_dir(out, "/usr/local/cuda/extras/CUPTI/lib64", names);
  for (const std::string& n : names) out.push_back(n);  // LD_LIBRARY_PATH, ldconfig cache
  return out;
}

std::vector<std::string> loaded_cupti_paths(unsigned long long* adds) {
  LoadedObjects all = loaded_objects();
  if (adds) *adds = all.adds;
  std::vector<std::string> out;
  for (const std::string& p : all.paths)
    if (base_of(p).rfind("libcupti.so", 0) == 0) out.push_back(p);
  return out;
}

LoadResult load_cupti(const LoaderOptions& o, const AcceptFn& accept) {
  LoadResult res;
  std::string tried;              // files that opened but were refused, and why
  std::vector<std::string> not_found;
  std::vector<std::string> seen;  // files already tried (a NOLOAD hit is also a candidate path)
  auto attempt = [&](const std::string& what, int flags) -> bool {
    void* h = load_library(what.c_str(), flags);
    if (!h) {
      if (!(flags & RTLD_NOLOAD)) {
        const char* e = dlerror();
        if (e && std::strstr(e, "No such file")) not_found.push_back(what);
        else tried += (tried.empty() ? "" : "; ") + what + (e ? std::string(": ") + e : "");
      }
      return false;
    }
    Fns f;
    std::string missing = resolve(h, &f);
    if (!missing.empty()) {
      tried += (tried.empty() ? "" : "; ") + what + ": no " + missing;
      return false;  // not closed: harmless, and a library CUPTI also uses may sit behind it
    }
    std::string path = loaded_path(h, what);
    if (std::find(seen.begin(), seen.end(), path) != seen.end()) return false;
    seen.push_back(path);
    auto api = std::make_unique<DlCupti>(f, path);
    std::string why;
    if (accept && accept(*api, &why) == Accept::next) {
      tried += (tried.empty() ? "" : "; ") + path + ": " + why;
      return false;  // not closed: CUPTI may have started threads
    }
    res.api = std::move(api);
    res.error = why;  // the accepting caller's own error, if any
    return true;
  };
  if (o.explicit_path.empty())
    for (const std::string& n : cupti_sonames(o.driver_version))
      if (attempt(n, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return res;
  for (const std::string& c : cupti_candidates(o))
    if (attempt(c, RTLD_NOW | RTLD_LOCAL)) return res;
  std::string missing = group_by_directory(not_found);
  res.error = "libcupti not found or unusable (tried " + tried + (tried.empty() || missing.empty() ? "" : "; ") +
              (missing.empty() ? "" : "not found: " + missing) + ")";
  return res;
}

namespace {

// Whether a libcuda is mapped, without opening a file: dlopen(RTLD_NOLOAD) of a name that is not
// loaded still searches the library path and opens each candidate, and this runs at every flush
// tick -- a descriptor each time, taken from an application that may be at its limit (issue 24).
int find_driver(dl_phdr_info* info, size_t, void* found) {
  const char* name = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
  name = name ? name + 1 : info->dlpi_name;
  if (name && std::strncmp(name, "libcuda.so", 10) == 0) *static_cast<bool*>(found) = true;
  return *static_cast<bool*>(found) ? 1 : 0;
}

bool driver_mapped() {
  bool found = false;
  ForkGate no_fork_while;  // every flush tick: fork_gate.h
  dl_iterate_phdr(find_driver, &found);
  return found;
}

}  // namespace

bool cuda_initialized() {
  if (!driver_mapped()) return false;
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
