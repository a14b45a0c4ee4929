// The files of a run directory, listed without building a path per entry: a run directory holds
// a file per rank, 100,000 at that scale, and every report lists it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace laggard::report {

// rank*.json, rank*.lgr (a writer's hidden temporary names start with a dot).
bool is_rank_file_name(std::string_view name);
// hang-*.json, the watchdog's hang reports (the one dot of ".json" is then the name's last).
bool is_hang_report_name(std::string_view name);

// The regular files of `dir` whose names `wanted` accepts, as `dir/name`, in name order; none when
// `dir` cannot be read. Names are matched before any path is built or any type asked for (a
// directory_iterator built a path and its list of components per entry: issue 29, a quarter of a
// second of one thread at 100,000 files). A link, or an entry whose type the directory does not
// give, is followed as directory_entry::is_regular_file does.
std::vector<std::string> regular_files_named(const std::string& dir, bool (*wanted)(std::string_view name));

// regular_files_named(dir, is_rank_file_name).
std::vector<std::string> rank_files_in(const std::string& dir);

// A run directory's rank files and hang reports, each in name order, from one pass over its entries
// (at 100,000 ranks the report listed the directory three times: its rank files, then its hang
// reports, then its subdirectories for them).
struct RunDirFiles {
  std::vector<std::string> ranks, hang_reports;
};
RunDirFiles run_dir_files(const std::string& dir);

}  // namespace laggard::report
