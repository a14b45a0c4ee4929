#include "cat_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "rank_file_json.h"

namespace laggard::cli {

namespace {

// A directory stands for its rank files (rank*.json, rank*.lgr), in name order: a run directory.
std::vector<std::string> rank_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string ext = it->path().extension().string();
    if (name.rfind("rank", 0) == 0 && (ext == ".json" || ext == ".lgr") && it->is_regular_file(ec))
      files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int cat_command(const std::vector<std::string>& args, bool pretty, std::ostream& out, std::ostream& err) {
  int rc = 0;
  std::vector<std::string> files;
  for (const std::string& a : args) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a, ec)) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> in_dir = rank_files_in(a);
    if (in_dir.empty()) {
      err << "laggard cat: '" << a << "' is a directory without rank files (rank*.lgr, rank*.json); "
          << "a run directory is LAGGARD_OUT/RUN_ID\n";
      rc = 1;
    }
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      err << "laggard cat: cannot open '" << file << "'\n";
      rc = 1;
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    report::RankFileJson r = report::rank_file_json(text.str());
    if (!r.doc.is_null()) out << r.doc.dump(pretty ? 2 : -1) << '\n';
    if (!r.problem.empty()) {
      err << "laggard cat: " << file << ": " << r.problem << '\n';
      rc = 1;
    }
  }
  out.flush();
  return rc;
}

}  // namespace laggard::cli
