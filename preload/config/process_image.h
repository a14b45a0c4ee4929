// Which process image this is (issue 24). A pid names a process, not an image: a rank that
// exec()s itself keeps its pid, and a second attempt in a fresh PID namespace (a container, a
// Slurm requeue) can get the same pid again. Every file name laggard writes carries the image's
// own identity beside the pid, so one image never replaces or appends to another's file and
// the reader never merges two images' windows.
#pragma once

#include <cstdint>
#include <string>

#include "env.h"

namespace laggard {

struct ProcessImage {
  std::string id;              // 8 lowercase hex digits, random per image
  uint64_t started_ticks = 0;  // /proc/self/stat field 22 (0 when unreadable): equal across exec
};

// Activation (not a signal handler): getrandom(2), else clocks and addresses.
// LAGGARD_TEST_IMAGE_ID (8 hex digits) forces the id: tests plant files at the exact names a
// rank will use. Not for users: every image of a process would then share one id.
ProcessImage this_process_image(const Env& env);

// "rank00003-1234-0a1b2c3d" (image "" gives the older "rank00003-1234").
std::string rank_file_stem(int rank, long pid, const std::string& image);

}  // namespace laggard
