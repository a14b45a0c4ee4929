#include "cat_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dir_listing.h"
#include "rank_file_json.h"

namespace laggard::cli {

int cat_command(const std::vector<std::string>& args, bool pretty, std::ostream& out, std::ostream& err) {
  int rc = 0;
  std::vector<std::string> files;
  for (const std::string& a : args) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a, ec)) {
      files.push_back(a);
      continue;
    }
    // A directory stands for its rank files, in name order: a run directory.
    std::vector<std::string> in_dir = report::rank_files_in(a);
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
