#include "import_command.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "import_kineto.h"
#include "import_nsys.h"

namespace laggard::cli {
namespace fs = std::filesystem;
using namespace laggard::report;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// HTA reads names ending in ".gz" or "json"; laggard takes .json and .json.gz from a directory.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, const std::string& format,
                                       std::ostream& err) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::directory_iterator(in, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::string p = it->path().string();
      bool wanted = format == "nsys" ? ends_with(p, ".sqlite") : ends_with(p, ".json") || ends_with(p, ".json.gz");
      if (it->is_regular_file(ec) && wanted) found.push_back(p);
    }
    if (found.empty()) err << fmt::format("laggard import: {}: no {} files in this directory\n", in,
                                          format == "nsys" ? ".sqlite" : ".json or .json.gz");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

ImportedRank import_one(const ImportOptions& o, const std::string& file) {
  if (o.format == "nsys") return import_nsys(file, {o.rank});
  return import_kineto(file, {o.rank});
}

}  // namespace

int import_command(const ImportOptions& o, std::ostream& out, std::ostream& err) {
  std::vector<std::string> files = expand_inputs(o.inputs, o.format, err);
  if (o.rank >= 0 && files.size() != 1) {
    err << "laggard import: --rank needs exactly one input file\n";
    return 2;
  }
  std::string run_id = o.run_id.empty() ? fs::path(o.out).lexically_normal().filename().string() : o.run_id;
  if (run_id.empty() || run_id == "." || run_id == "..") run_id = "imported";
  std::map<int, std::string> done;  // rank -> file
  size_t failed = 0;
  for (const std::string& file : files) {
    try {
      ImportedRank r = import_one(o, file);
      if (auto it = done.find(r.rank); it != done.end()) {
        err << fmt::format("laggard import: {}: rank {} was already imported from {}; skipped\n", file, r.rank,
                           it->second);
        ++failed;
        continue;
      }
      const std::vector<std::string> paths = write_rank_file(r, o.out, run_id);
      const std::string path =
          paths.size() == 1 ? paths[0] : fmt::format("{} ... ({} segments)", paths.front(), paths.size());
      done[r.rank] = file;
      size_t kernels = std::count_if(r.gpu.begin(), r.gpu.end(), [](const GpuActivity& a) { return a.kind == GpuKind::kernel; });
      out << fmt::format("{} -> {}: rank {} ({}){}, {} kernels, {} memcpy/memset, {} ranges, {} NCCL kernels\n", file,
                         path, r.rank, r.rank_source, r.world_size > 0 ? fmt::format(" of {}", r.world_size) : "",
                         kernels, r.gpu.size() - kernels, r.ranges.size(), r.collectives.size());
      for (const std::string& n : r.notes) out << "  note: " << n << '\n';
    } catch (const std::exception& e) {
      err << fmt::format("laggard import: {}: {}\n", file, e.what());
      ++failed;
    }
  }
  if (done.empty()) {
    err << "laggard import: nothing imported\n";
    return 2;
  }
  out << fmt::format("imported {} rank(s) into {} (run '{}'); read it with `laggard report {}`\n", done.size(), o.out,
                     run_id, o.out);
  return failed ? 1 : 0;
}

}  // namespace laggard::cli
