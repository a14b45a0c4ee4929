// Finding libcupti and the CUDA driver at run time. Nothing here links against either; a
// process that never uses CUDA never loads them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cupti_api.h"

namespace laggard::cupti {

struct LoaderOptions {
  std::string explicit_path;  // LAGGARD_CUPTI_PATH: a libcupti file or a directory; the only place tried
  std::string cuda_home;      // CUDA_HOME
};

struct LoadResult {
  std::unique_ptr<CuptiApi> api;  // null on failure
  std::string error;              // why, naming every place tried
};

// Where libcupti is looked for, in order (exposed for tests):
//   LAGGARD_CUPTI_PATH alone when set; else a libcupti the process already loaded (so laggard
//   uses the same CUPTI as, e.g., PyTorch); else $CUDA_HOME/{lib64,extras/CUPTI/lib64},
//   /usr/local/cuda/{lib64,extras/CUPTI/lib64}; else the loader's search path.
std::vector<std::string> cupti_candidates(const LoaderOptions& opts);

// Loads the first candidate that opens and has every required function.
LoadResult load_cupti(const LoaderOptions& opts);

// True when libcuda.so.1 is already loaded in this process and cuInit has succeeded. Never
// loads or initializes the driver itself.
bool cuda_initialized();

}  // namespace laggard::cupti
