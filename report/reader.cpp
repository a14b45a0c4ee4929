#include "reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reader_gpu.h"
#include "reader_nccl.h"
#include "signals.h"

namespace laggard::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMinSchema = 1, kMaxSchema = 4;

bool is_rank_file(const fs::path& p) {
  std::string n = p.filename().string();
  return n.rfind("rank", 0) == 0 && p.extension() == ".json";
}

std::vector<fs::path> rank_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && is_rank_file(it->path())) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::file_time_type newest(const std::vector<fs::path>& files) {
  fs::file_time_type t = fs::file_time_type::min();  // its epoch is not 1970: {} is not "oldest"
  std::error_code ec;
  for (const auto& f : files) t = std::max(t, fs::last_write_time(f, ec));
  return t;
}

Counts read_counts(const json& j) {
  Counts c;
  if (j.is_object())
    for (auto& [k, v] : j.items())
      if (v.is_number_unsigned() || v.is_number_integer()) c[k] = v.get<uint64_t>();
  return c;
}

// One parsed segment file.
struct Segment {
  std::string path;
  std::string run_id;
  int rank = -1, local_rank = -1, world_size = -1, segment = 0;
  std::string host, nvtx_status;
  long pid = 0;
  int64_t process_start_ns = 0, data_end_ns = 0;
  bool final = false;
  int signal = 0;
  double flush_s = 0;
  Counts dropped;
  std::vector<CaptureWindow> windows;
  int64_t gpu_clock_offset_ns = 0;
  std::string cupti_status;
  int64_t import_time_base_ns = -1;
};

template <class T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

SectionWindow read_section(const json& s, int64_t window_start) {
  SectionWindow sec;
  sec.name = s.at("name").get<std::string>();
  sec.parent = get_or<std::string>(s, "parent", "");
  sec.count = s.at("count").get<uint64_t>();
  sec.total_ns = s.at("total_ns").get<int64_t>();
  sec.min_ns = s.at("min_ns").get<int64_t>();
  sec.max_ns = s.at("max_ns").get<int64_t>();
  sec.median_ns = s.at("median_ns").get<int64_t>();
  if (auto it = s.find("occurrences"); it != s.end()) {
    const auto& starts = it->at("start_offset_ns");
    const auto& durs = it->at("dur_ns");
    const auto& tids = it->at("tid");
    if (starts.size() != durs.size() || starts.size() != tids.size())
      throw std::runtime_error("occurrence arrays of section '" + sec.name + "' differ in length");
    double weight = starts.empty() ? 1.0 : std::max(1.0, double(sec.count) / double(starts.size()));
    sec.occurrences.reserve(starts.size());
    for (size_t i = 0; i < starts.size(); ++i)
      sec.occurrences.push_back({window_start + starts[i].get<int64_t>(), durs[i].get<int64_t>(),
                                 tids[i].get<uint32_t>(), weight});
  }
  return sec;
}

Segment parse_segment(const fs::path& path, StringTable& strings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open file");
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (text.empty()) throw std::runtime_error("empty file");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(fmt::format("truncated or invalid JSON (at byte {} of {})", e.byte, text.size()));
  }
  if (!j.is_object() || get_or<std::string>(j, "schema", "") != "laggard-rank")
    throw std::runtime_error("not a laggard rank file");
  int version = get_or<int>(j, "schema_version", 0);
  if (version < kMinSchema || version > kMaxSchema)
    throw std::runtime_error(fmt::format("unsupported schema_version {} (this laggard reads {}..{})",
                                         version, kMinSchema, kMaxSchema));
  Segment s;
  s.path = path.string();
  s.run_id = j.at("run_id").get<std::string>();
  s.rank = j.at("rank").get<int>();
  s.local_rank = get_or<int>(j, "local_rank", -1);
  s.world_size = get_or<int>(j, "world_size", -1);
  s.segment = get_or<int>(j, "segment", 0);
  s.host = get_or<std::string>(j, "host", "");
  s.pid = get_or<long>(j, "pid", 0);
  s.process_start_ns = get_or<int64_t>(j, "process_start_ns", 0);
  s.data_end_ns = get_or<int64_t>(j, "data_end_ns", 0);
  s.final = get_or<bool>(j, "final", false);
  s.signal = get_or<int>(j, "signal", 0);
  if (auto it = j.find("config"); it != j.end()) s.flush_s = get_or<double>(*it, "flush_s", 0.0);
  if (auto it = j.find("capture"); it != j.end()) {
    s.nvtx_status = get_or<std::string>(*it, "nvtx", "");
    s.cupti_status = get_or<std::string>(*it, "cupti", "");
  }
  if (auto it = j.find("import"); it != j.end() && it->is_object())
    s.import_time_base_ns = get_or<int64_t>(*it, "time_base_ns", 0);
  if (auto it = j.find("clock"); it != j.end()) s.gpu_clock_offset_ns = get_or<int64_t>(*it, "gpu_offset_ns", 0);
  s.dropped = read_counts(j.value("dropped", json::object()));
  for (const json& w : j.at("windows")) {
    CaptureWindow cw;
    cw.index = w.at("index").get<uint64_t>();
    cw.start_ns = w.at("start_ns").get<int64_t>();
    cw.end_ns = w.at("end_ns").get<int64_t>();
    cw.dropped = read_counts(w.value("dropped", json::object()));
    for (const json& sec : w.at("sections")) cw.sections.push_back(read_section(sec, cw.start_ns));
    if (auto g = w.find("gpu"); g != w.end() && g->is_object()) read_gpu_window(*g, cw.start_ns, strings, cw);
    if (auto it = w.find("nccl"); it != w.end() && it->is_object()) read_nccl_window(*it, strings, cw);
    s.windows.push_back(std::move(cw));
  }
  return s;
}

uint64_t occurrence_count(const RankData& r) {
  uint64_t n = 0;
  for (const auto& w : r.windows)
    for (const auto& s : w.sections) n += s.count;
  return n;
}

std::string fmt_seconds(int64_t ns) { return fmt::format("{:.1f} s", double(ns) / 1e9); }

}  // namespace

RunModel read_run(const std::string& dir_arg, const ReadOptions& opts) {
  fs::path dir(dir_arg);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("'" + dir_arg + "' is not a directory");

  RunModel model;
  // DIR is a run directory itself, or a LAGGARD_OUT holding one directory per run.
  std::vector<fs::path> files = rank_files_in(dir);
  if (files.empty()) {
    std::vector<std::pair<fs::path, std::vector<fs::path>>> runs;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_directory(ec))
        if (auto f = rank_files_in(it->path()); !f.empty()) runs.emplace_back(it->path(), std::move(f));
    if (runs.empty()) throw std::runtime_error("no laggard rank files (rank*.json) in '" + dir_arg + "' or its run directories");
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return newest(a.second) > newest(b.second); });
    size_t pick = 0;
    if (!opts.run_id.empty()) {
      auto it = std::find_if(runs.begin(), runs.end(),
                             [&](const auto& r) { return r.first.filename() == opts.run_id; });
      if (it == runs.end()) throw std::runtime_error("no run '" + opts.run_id + "' in '" + dir_arg + "'");
      pick = static_cast<size_t>(it - runs.begin());
    }
    for (size_t i = 0; i < runs.size(); ++i)
      if (i != pick) model.other_runs.push_back(runs[i].first.filename().string());
    dir = runs[pick].first;
    files = runs[pick].second;
  }
  model.dir = dir.string();

  std::vector<Segment> segments;
  for (const auto& f : files) {
    try {
      segments.push_back(parse_segment(f, model.strings));
    } catch (const std::exception& e) {
      model.problems.push_back({"unreadable_file", -1, f.string(), e.what()});
    }
  }
  if (segments.empty()) {
    if (model.problems.empty()) throw std::runtime_error("no readable rank files in '" + model.dir + "'");
    return model;  // every file is listed as a problem; the report says so
  }

  // One run per directory: files of another run are set aside, never mixed in.
  std::map<std::string, int> run_votes;
  for (const auto& s : segments) ++run_votes[s.run_id];
  model.run_id = opts.run_id.empty() || !run_votes.count(opts.run_id)
                     ? std::max_element(run_votes.begin(), run_votes.end(),
                                        [](auto& a, auto& b) { return a.second < b.second; })->first
                     : opts.run_id;
  std::map<std::pair<int, long>, std::vector<Segment*>> by_process;
  for (auto& s : segments) {
    if (s.run_id != model.run_id) {
      model.problems.push_back({"foreign_run", s.rank, s.path,
                                "belongs to run '" + s.run_id + "', not '" + model.run_id + "'; ignored"});
      continue;
    }
    by_process[{s.rank, s.pid}].push_back(&s);
  }

  std::map<int, std::vector<RankData>> by_rank;
  for (auto& [key, segs] : by_process) {
    std::sort(segs.begin(), segs.end(), [](Segment* a, Segment* b) { return a->segment < b->segment; });
    RankData r;
    const Segment& last = *segs.back();
    r.rank = key.first;
    r.pid = key.second;
    r.run_id = last.run_id;
    r.local_rank = last.local_rank;
    r.world_size = last.world_size;
    r.host = last.host;
    r.process_start_ns = last.process_start_ns;
    r.final = last.final;
    r.signal = last.signal;
    r.flush_s = last.flush_s;
    r.nvtx_status = last.nvtx_status;
    r.cupti_status = last.cupti_status;
    r.gpu_clock_offset_ns = last.gpu_clock_offset_ns;
    r.import_time_base_ns = last.import_time_base_ns;
    r.dropped = last.dropped;  // cumulative in every file; the last one is the newest
    std::set<uint64_t> seen;
    for (Segment* s : segs) {
      r.files.push_back(s->path);
      r.data_end_ns = std::max(r.data_end_ns, s->data_end_ns);
      for (auto& w : s->windows)
        if (seen.insert(w.index).second) r.windows.push_back(std::move(w));
    }
    std::sort(r.windows.begin(), r.windows.end(), [](auto& a, auto& b) { return a.index < b.index; });
    by_rank[r.rank].push_back(std::move(r));
  }

  for (auto& [rank, procs] : by_rank) {
    if (procs.size() > 1) {
      std::sort(procs.begin(), procs.end(), [](const RankData& a, const RankData& b) {
        return occurrence_count(a) > occurrence_count(b);
      });
      std::string pids;
      for (const auto& p : procs) pids += (pids.empty() ? "" : ", ") + std::to_string(p.pid);
      model.problems.push_back({"duplicate_rank", rank, "",
                                fmt::format("rank {} was written by {} processes (pids {}); using pid {}, "
                                            "which recorded the most",
                                            rank, procs.size(), pids, procs.front().pid)});
    }
    model.ranks.push_back(std::move(procs.front()));
  }
  for (RankData& r : model.ranks) finish_nccl_rank(r, model.problems);

  // World size: what the ranks say (they should agree), or what the user says.
  std::set<int> sizes;
  for (const auto& r : model.ranks)
    if (r.world_size > 0) sizes.insert(r.world_size);
  if (sizes.size() > 1)
    model.problems.push_back({"inconsistent_world_size", -1, "",
                              fmt::format("ranks disagree on the world size ({} to {}); using the largest",
                                          *sizes.begin(), *sizes.rbegin())});
  model.world_size = opts.expect_world_size > 0 ? opts.expect_world_size
                     : sizes.empty()            ? model.ranks.back().rank + 1
                                                : *sizes.rbegin();
  std::set<int> present;
  for (const auto& r : model.ranks) present.insert(r.rank);
  for (int rank = 0; rank < model.world_size; ++rank) {
    if (present.count(rank)) continue;
    int last = rank;
    while (last + 1 < model.world_size && !present.count(last + 1)) ++last;
    if (last - rank >= 2) {  // a run of missing ranks (e.g. 2 imported ranks of a 128-rank job): one entry
      model.problems.push_back({"missing_rank", rank, "",
                                fmt::format("ranks {}-{} ({} ranks) wrote no readable file (world size {})", rank,
                                            last, last - rank + 1, model.world_size)});
      rank = last;
      continue;
    }
    model.problems.push_back({"missing_rank", rank, "",
                              fmt::format("rank {} wrote no readable file (world size {})", rank, model.world_size)});
  }

  int64_t run_start = INT64_MAX;
  for (const auto& r : model.ranks) run_start = std::min(run_start, r.process_start_ns);
  for (const auto& r : model.ranks) {
    if (r.final) continue;
    std::string when = fmt_seconds(r.data_end_ns - run_start);
    if (r.signal)
      model.problems.push_back({"incomplete_rank", r.rank, "",
                                fmt::format("rank {} (pid {}, {}) received {} and flushed; data ends at {}",
                                            r.rank, r.pid, r.host, signal_name(r.signal), when)});
    else
      model.problems.push_back({"incomplete_rank", r.rank, "",
                                fmt::format("rank {} (pid {}, {}) has no final flush (killed, crashed or still "
                                            "running); data ends at {}, its last flush",
                                            r.rank, r.pid, r.host, when)});
  }
  for (const auto& r : model.ranks) {
    uint64_t lost = 0;
    for (const auto& [k, v] : r.dropped)
      if (k != "occurrences_sampled" && k != "gpu_records_not_stored") lost += v;
    if (lost)
      model.problems.push_back({"dropped_records", r.rank, "",
                                fmt::format("rank {} lost or could not match {} records (see dropped counts)",
                                            r.rank, lost)});
  }
  return model;
}

}  // namespace laggard::report
