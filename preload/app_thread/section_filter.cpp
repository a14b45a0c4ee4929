#include "section_filter.h"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>

#include "fork_gate.h"

namespace laggard {

struct SectionFilter::Api {
  void* (*compile)(const char*, char*, size_t);
  int (*search)(const void*, const char*, size_t);
  void (*free)(void*);
};

namespace {

const SectionFilter::Api* load_api(std::string* error) {
  static std::once_flag once;
  static SectionFilter::Api api{};
  // Never destroyed: a static with a destructor registers it with __cxa_atexit when first reached,
  // on whichever thread that is, and a fork meanwhile leaves the child's exit() stuck (fork_gate.h).
  static std::string& load_error = *new std::string;
  std::call_once(once, [] {
    std::string path = re2_shim_path();
    void* h = load_library(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      load_error = "cannot load " + path + " (" + (e ? e : "?") + ")";
      return;
    }
    api.compile = reinterpret_cast<decltype(api.compile)>(::dlsym(h, "laggard_re2_compile"));
    api.search = reinterpret_cast<decltype(api.search)>(::dlsym(h, "laggard_re2_search"));
    api.free = reinterpret_cast<decltype(api.free)>(::dlsym(h, "laggard_re2_free"));
    if (!api.compile || !api.search || !api.free) {
      api = {};
      load_error = path + " lacks its entry points";
    }
  });
  if (!api.compile) {
    if (error) *error = load_error;
    return nullptr;
  }
  return &api;
}

}  // namespace

std::string re2_shim_path() {
  Dl_info info{};
  std::string dir = ".";
  if (::dladdr(reinterpret_cast<void*>(&re2_shim_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    if (self.find('/') == std::string::npos) {  // the main program, found through PATH
      char buf[4096];
      ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
      if (n > 0) self.assign(buf, static_cast<size_t>(n));
    }
    if (size_t slash = self.rfind('/'); slash != std::string::npos) dir = self.substr(0, slash);
  }
  return dir + "/liblaggard-re2.so";
}

std::unique_ptr<SectionFilter> SectionFilter::compile(const std::string& pattern, std::string* error) {
  const Api* api = load_api(error);
  if (!api) return nullptr;
  char buf[256] = {0};
  void* re = api->compile(pattern.c_str(), buf, sizeof buf);
  if (!re) {
    if (error) *error = buf[0] ? buf : "invalid pattern";
    return nullptr;
  }
  return std::unique_ptr<SectionFilter>(new SectionFilter(api, re));
}

SectionFilter::~SectionFilter() { api_->free(re_); }

bool SectionFilter::matches(std::string_view name) const {
  return api_->search(re_, name.data(), name.size()) == 1;
}

}  // namespace laggard
