// The NCCL part of the reader (docs/schema.md, "version 3"): a window's "nccl" object into the
// window's Collective records, and the per-rank checks that follow once all windows are read.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "model.h"

namespace laggard::report {

// Throws std::runtime_error when the object is malformed (the file is then reported unreadable).
void read_nccl_window(const nlohmann::json& nccl, StringTable& strings, CaptureWindow& window);

// After a rank's windows are merged: maps NCCL's GPU timestamps onto the host clock when they
// are not epoch-based, and lists NCCL records that were lost as problems.
void finish_nccl_rank(RankData& rank, std::vector<Problem>& problems);

}  // namespace laggard::report
