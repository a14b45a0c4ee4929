// One trial of the detection-power study (bench/detection-power): a synthetic run with one
// rank slowed by a factor in one section for some steps (or none, for a healthy run), put
// through the report's pipeline; did the verdict name that rank and section, and what else did
// it find?
#pragma once

#include <cstdint>
#include <string>

namespace laggard::synth {

struct PowerTrial {
  bool gpu = false;            // false: CPU-only run (NVTX sections); true: GPU kernels + all-reduce
  int ranks = 4;
  int steps = 40;
  double noise = 0.02;         // every piece of work x uniform(1 - noise, 1 + noise), per step
  double factor = 1.0;         // 1: a healthy run
  std::string section;         // the slowed section
  int duration = 0;            // slowed steps; 0: the whole run
  uint64_t seed = 1;           // noise, slow rank and start step
};

struct PowerOutcome {
  bool found = false;          // a finding with the slowed rank and section (overlapping its steps)
  bool exact_steps = false;    // ... with exactly its step range (whole run: no range)
  int other_findings = 0;      // findings naming another rank (or any, in a healthy run): false findings
  int misplaced = 0;           // findings naming the slowed rank but another section or steps
  double cost_share = 0;       // the fault's cost: its extra time per affected step / healthy step time
  std::string first_other;     // the first false finding's summary, to see what went wrong
};

// The sections of the stand-in loop and their share of the step (CPU and GPU layouts).
double section_share(bool gpu, const std::string& section);

PowerOutcome run_power_trial(const PowerTrial& t);

}  // namespace laggard::synth
