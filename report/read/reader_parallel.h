// Parsing a run's rank files on every core: each file into its own Segment and string table,
// then merged in file order, so the run model is the same whatever the thread count.
#pragma once

#include <cstddef>
#include <functional>

namespace laggard::report {

// Runs f(0) .. f(n-1) on `threads` threads (the caller's among them); each index exactly once.
// f must not throw.
void parallel_for(size_t n, unsigned threads, const std::function<void(size_t)>& f);

// Threads to read `files` files with: ReadOptions::threads, else the machine's cores, never more
// than there are files.
unsigned reader_threads(unsigned requested, size_t files);

}  // namespace laggard::report
