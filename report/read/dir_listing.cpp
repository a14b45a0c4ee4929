#include "dir_listing.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

namespace laggard::report {

bool is_rank_file_name(std::string_view name) {
  return name.starts_with("rank") && (name.ends_with(".json") || name.ends_with(".lgr"));
}

std::vector<std::string> regular_files_named(const std::string& dir, bool (*wanted)(std::string_view name)) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return out;
  // As path's operator/ joins them: no second separator after one the directory ends with.
  const std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + '/';
  while (const dirent* e = ::readdir(d)) {
    if (!wanted(e->d_name)) continue;
    std::string path = prefix + e->d_name;
    struct stat st {};
    if (e->d_type == DT_REG || ((e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) && ::stat(path.c_str(), &st) == 0 &&
                                S_ISREG(st.st_mode)))
      out.push_back(std::move(path));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_hang_report_name(std::string_view name) { return name.starts_with("hang-") && name.ends_with(".json"); }

std::vector<std::string> rank_files_in(const std::string& dir) { return regular_files_named(dir, is_rank_file_name); }

RunDirFiles run_dir_files(const std::string& dir) {
  RunDirFiles out;
  auto either = [](std::string_view n) { return is_rank_file_name(n) || is_hang_report_name(n); };
  for (std::string& path : regular_files_named(dir, either)) {
    const size_t slash = path.rfind('/');
    const std::string_view name = slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
    (is_rank_file_name(name) ? out.ranks : out.hang_reports).push_back(std::move(path));
  }
  return out;
}

}  // namespace laggard::report
