#include "cat_command.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "rank_file_json.h"

namespace laggard::cli {

int cat_command(const std::vector<std::string>& files, bool pretty, std::ostream& out, std::ostream& err) {
  int rc = 0;
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
