// A synthetic run whose every name from a trace is an attack on an HTML page (issue 15): NVTX
// sections, kernels, hosts and a problem message that would run script or fetch if a renderer
// pasted them into markup or into a <script> block. Rank 3 is slow in the first section, so the
// verdict, stragglers and every chart carry the names.
#pragma once

#include <string>

#include "synthetic_run.h"

namespace laggard::synth {

inline const std::string kImgAttack = "<img src=x onerror=alert(1)>";
inline const std::string kScriptAttack = "</script><script>alert(1)</script>";
inline const std::string kAttrAttack = "opt\" onmouseover=\"alert(1)\" x='";
inline const std::string kKernelAttack = "<svg onload=alert(1)>gemm";
inline const std::string kHostAttack = "<iframe src=https://example.invalid/>";
inline const std::string kProblemAttack = "<script>alert('problem')</script>\xe2\x80\xa8<!--";

inline Spec hostile_spec(int ranks = 8) {
  Spec s;
  s.ranks = ranks;
  s.ranks_per_host = 4;
  s.steps = 30;
  s.kernels = {{kKernelAttack, kImgAttack, 200'000},
               {"softmax", kImgAttack, 30'000},
               {"bwd", kScriptAttack, 300'000},
               {"adam", kAttrAttack, 60'000}};
  s.faults.push_back({Fault::Kind::slow_gpu, 3, 1.8, 0, kImgAttack});
  return s;
}

inline report::RunModel hostile_run(int ranks = 8) {
  report::RunModel m = make_run(hostile_spec(ranks));
  m.run_id = "run-<b>bold</b>";
  for (auto& r : m.ranks) r.host = kHostAttack + std::to_string(r.rank / 4);
  m.problems.push_back({"<i>kind</i>", 2, "/tmp/<x>", kProblemAttack});
  return m;
}

}  // namespace laggard::synth
