// PyTorch profiler traces in the older format (issue 25): a bare JSON array of events, which
// torch.profiler writes when PyTorch was built without Kineto (Debian's python3-torch 1.13:
// torch.autograd.kineto_available() is False). EventList.export_chrome_trace writes one line per
// event with a fixed printf layout (torch/autograd/profiler_util.py, v1.13.1, lines 188-241):
//     {"name": "%s", "ph": "X", "ts": %s, "dur": %s, "tid": %s, "pid": "CPU functions", "args": {}}
// and "ph": "s" flow events toward CUDA kernels. Times are µs relative to the trace's start (no
// clock), tid is the profiler's own thread number, and the name is written unescaped: a name with
// a '"' or '\' makes the file invalid JSON, which is then read by that fixed layout instead.
// Sections: ProfilerStep#N (the steps, as for Kineto traces) and record_function ranges
// ("Optimizer.step#SGD.step", the program's own); operators are not sections: names with "::",
// autograd nodes ("AddmmBackward0"), and a bare name whose "aten::" form is in the trace
// ("detach"). gloo's and MPI's collectives ("gloo:all_reduce") become host-timed collectives
// "<op>@gloo" (host_collectives.h); the trace does not say which process group, so every call of
// one backend counts as one group.
#pragma once

#include <string>

#include "import_kineto.h"
#include "import_rank.h"

namespace laggard::report {

// True when the file's first non-blank byte (after gzip, if compressed) opens a JSON array.
bool is_json_array_file(const std::string& file);

// Reads FILE (.json or .json.gz, or a .gz name holding plain text, as the legacy exporter leaves
// it when tensorboard_trace_handler asks for gzip). The rank: options.rank, else the file name
// ("trace_rank3.json"), else an error saying so. Throws std::runtime_error with one sentence.
ImportedRank import_torch_legacy(const std::string& file, const KinetoOptions& options = {});

}  // namespace laggard::report
