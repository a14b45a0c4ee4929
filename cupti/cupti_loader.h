// Finding libcupti and the CUDA driver at run time. Nothing here links against either; a
// process that never uses CUDA never loads them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cupti_api.h"

namespace laggard::cupti {

struct LoaderOptions {
  std::string explicit_path;  // LAGGARD_CUPTI_PATH: a libcupti file or a directory; the only place tried
  std::string cuda_home;      // CUDA_HOME
  int driver_version = 0;     // cuDriverGetVersion (e.g. 12040); 0: unknown
  // Directories holding loaded libraries: a libcudart's, and pip wheels' site-packages/nvidia/*/lib.
  std::vector<std::string> cudart_dirs, wheel_dirs;
};

struct LoadResult {
  std::unique_ptr<CuptiApi> api;  // null on failure
  std::string error;              // why, naming every place tried
};

// Where libcupti is looked for, in order (exposed for tests):
//   LAGGARD_CUPTI_PATH alone when set; else a libcupti the process already loaded (so laggard
//   uses the same CUPTI as, e.g., PyTorch); else next to a loaded libcudart, in pip wheels'
//   site-packages/nvidia/*/lib, $CUDA_HOME/{lib64,extras/CUPTI/lib64},
//   /usr/local/cuda/{lib64,extras/CUPTI/lib64}; else the loader's search path. In each place the
//   soname matching the driver's CUDA major version comes first (a CUPTI newer than the driver
//   answers CUPTI_ERROR_NOT_INITIALIZED), then older ones, then newer ones. CUDA 11's sonames
//   carry the minor version (libcupti.so.11.8 ... libcupti.so.11.0).
std::vector<std::string> cupti_candidates(const LoaderOptions& opts);

// The libcupti sonames in the order tried for a driver of `driver_version` (0: unknown).
std::vector<std::string> cupti_sonames(int driver_version);

// Fills driver_version, cudart_dirs and wheel_dirs from what this process has loaded.
void discover_loaded(LoaderOptions& opts);

// What the caller decides about a loaded CUPTI: use it, or move on to the next candidate
// (CUPTI_ERROR_NOT_INITIALIZED: this CUPTI does not work with this driver).
enum class Accept { use, next };
using AcceptFn = std::function<Accept(CuptiApi&, std::string* why)>;

// Loads the first candidate that opens, has every required function, and is accepted.
LoadResult load_cupti(const LoaderOptions& opts, const AcceptFn& accept = nullptr);

// Paths of every libcupti loaded in this process now (dl_iterate_phdr), for the second-copy
// warning. `adds` (optional) receives the loader's count of objects ever loaded, so a caller
// can skip the walk when nothing new was loaded.
std::vector<std::string> loaded_cupti_paths(unsigned long long* adds = nullptr);

// True when libcuda.so.1 is already loaded in this process and cuInit has succeeded. Never
// loads or initializes the driver itself.
bool cuda_initialized();

}  // namespace laggard::cupti
