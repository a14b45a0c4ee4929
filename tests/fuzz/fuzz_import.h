// What the importer targets share: a scratch directory of this process on tmpfs for the input
// and the rank file the import writes, and the check that follows an import: the file
// write_rank_file wrote goes through the whole report (fuzz_report.h) like any rank file.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_report.h"
#include "import_rank.h"

namespace laggard::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    d /= "laggard-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, const uint8_t* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// An import that succeeded: its rank file, read back and reported. The importer may refuse
// what it cannot use (write_rank_file throws "nothing to import"), never write a file that
// crashes the report.
inline void report_imported(const laggard::report::ImportedRank& r) {
  const std::filesystem::path run = scratch_dir() / "run";
  std::filesystem::remove_all(run);
  std::string path;
  try {
    path = laggard::report::write_rank_file(r, run.string(), "fuzz").at(0);
  } catch (const std::runtime_error&) {
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), {}};
  report_rank_file(reinterpret_cast<const uint8_t*>(text.data()), text.size(), path.c_str());
}

}  // namespace laggard::fuzz
