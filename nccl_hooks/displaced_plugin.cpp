// Which profiler plugin laggard displaced by setting NCCL_PROFILER_PLUGIN (plugin_env.h,
// find_displaced_profiler). Asked once, on NCCL's init thread, at the first communicator: it
// looks at files and at libraries already loaded, and loads nothing.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "plugin_env.h"

namespace laggard::nccl {
namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The directories the dynamic loader searches for dlopen() calls made from `handle`'s object
// (LD_LIBRARY_PATH, its RUNPATH/RPATH, the system directories; not /etc/ld.so.cache).
std::vector<std::string> search_dirs_of(void* handle) {
  std::vector<std::string> dirs;
  Dl_serinfo size;
  if (!handle || dlinfo(handle, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof(Dl_serinfo)) return dirs;
  std::vector<char> buf(size.dls_size);
  auto* info = reinterpret_cast<Dl_serinfo*>(buf.data());
  info->dls_size = size.dls_size;
  info->dls_cnt = size.dls_cnt;
  if (dlinfo(handle, RTLD_DI_SERINFO, info) != 0) return dirs;
  for (unsigned i = 0; i < info->dls_cnt; ++i)
    if (info->dls_serpath[i].dls_name) dirs.emplace_back(info->dls_serpath[i].dls_name);
  return dirs;
}

int collect_loaded(struct dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && *info->dlpi_name)
    static_cast<std::vector<LoadedLibrary>*>(out)->push_back({info->dlpi_name, false});
  return 0;
}

}  // namespace

std::string find_displaced_profiler(const std::vector<std::string>& search_dirs,
                                    const std::vector<LoadedLibrary>& loaded, int table_version) {
  for (const std::string& dir : search_dirs) {
    std::string path = (dir.empty() ? std::string(".") : dir) + "/libnccl-profiler.so";
    if (access(path.c_str(), R_OK) == 0) return "libnccl-profiler.so in " + (dir.empty() ? std::string(".") : dir);
  }
  if (table_version >= 5)
    for (const LoadedLibrary& lib : loaded)
      if (base_name(lib.path).rfind("libnccl-net", 0) == 0 && lib.has_profiler_table)
        return "the profiler table of the net plugin " + lib.path;
  return "";
}

std::string find_displaced_profiler_here(int table_version) {
  std::vector<LoadedLibrary> loaded;
  dl_iterate_phdr(collect_loaded, &loaded);
  void* search_from = nullptr;
  for (LoadedLibrary& lib : loaded) {
    const std::string name = base_name(lib.path);
    void* h = nullptr;
    if (name.rfind("libnccl.so", 0) == 0 || name.rfind("libnccl-net", 0) == 0)
      h = dlopen(lib.path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);  // already loaded: no side effect
    if (!h) continue;
    if (name.rfind("libnccl-net", 0) == 0) {
      for (const char* sym : {"ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4"})
        lib.has_profiler_table |= dlsym(h, sym) != nullptr;
      dlclose(h);
    } else if (!search_from) {
      search_from = h;  // NCCL dlopens its plugins from libnccl: its search path counts
    } else {
      dlclose(h);
    }
  }
  if (!search_from) search_from = dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);  // NCCL linked into the program
  std::vector<std::string> dirs = search_dirs_of(search_from);
  if (search_from) dlclose(search_from);
  return find_displaced_profiler(dirs, loaded, table_version);
}

}  // namespace laggard::nccl
