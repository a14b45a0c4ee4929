#include "stacks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "dir_listing.h"
#include "model.h"
#include "subprocess.h"

namespace laggard::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A module named in a hang report, opened only if it is a regular file: a name can lead anywhere
// by the time the report is read (issue 24: a FIFO blocked open() and addr2line for good).
// addr2line is then given this very file as /proc/self/fd/N, never the name again. -1: not one.
int open_module(const std::string& path, unsigned char (&hdr)[18]) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::read(fd, hdr, sizeof hdr) == static_cast<ssize_t>(sizeof hdr))
    return fd;
  ::close(fd);
  return -1;
}

// A number of a hang report as T: json::value(key, T) would convert a float or a too-large
// value with undefined behaviour (a hang report is a file, as hostile as a rank file).
template <typename T>
T checked_number(const json& v, const char* key) {
  using limits = std::numeric_limits<T>;
  const auto bad = [key] { return std::runtime_error(std::string("hang report: '") + key + "' is not a valid number"); };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(limits::max())) throw bad();
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < static_cast<int64_t>(limits::lowest()) || (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(limits::max())))
      throw bad();
    return static_cast<T>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // [lowest, max + 1): both ends exact in a double for every integer type used here.
    if (!(d >= static_cast<double>(limits::lowest()) && d < 2.0 * static_cast<double>(limits::max() / 2 + 1)))
      throw bad();
    return static_cast<T>(d);
  }
  throw bad();
}

template <typename T>
T number_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() ? fallback : checked_number<T>(*it, key);
}

HangCollective parse_collective(const json& j) {
  HangCollective c;
  c.comm = j.value("comm", "");
  c.comm_name = j.value("comm_name", "");
  c.func = j.value("func", "");
  c.seq = number_or<uint64_t>(j, "seq", 0);
  c.p2p = j.contains("peer");
  c.peer = number_or<int>(j, "peer", -1);
  c.host_stopped = j.value("host_stopped", false);
  c.channels = number_or<int>(j, "channels", 0);
  c.channels_started = number_or<int>(j, "channels_started", 0);
  c.channels_stopped = number_or<int>(j, "channels_stopped", 0);
  c.host_start_ns = number_or<int64_t>(j, "host_start_ns", 0);
  return c;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Frames of the system and of laggard itself say where the app is only through their callers.
bool is_system_module(const std::string& module) {
  std::string b = base_name(module);
  for (const char* prefix : {"libc.so", "libc-", "ld-linux", "libpthread", "libunwind", "liblaggard", "libgcc_s"})
    if (b.rfind(prefix, 0) == 0) return true;
  return false;
}

// "(anonymous namespace)::load_batch(double)" -> "load_batch()"
std::string short_name(std::string s) {
  for (const std::string anon : {"(anonymous namespace)::"})
    for (size_t at; (at = s.find(anon)) != std::string::npos;) s.erase(at, anon.size());
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) return s.substr(0, i) + "()";
  }
  return s.empty() ? s : s + "()";
}

const HangThread* representative(const RankHang& r) {
  const HangThread* best = nullptr;
  for (const HangThread& t : r.threads)
    if (t.main && (t.status == "captured" || !t.sections.empty())) return &t;
  for (const HangThread& t : r.threads)
    if (t.status == "captured" && (!best || t.sections.size() > best->sections.size())) best = &t;
  return best;
}

std::vector<std::string> app_frames(const HangThread* t, size_t max) {
  std::vector<std::string> out;
  if (!t) return out;
  for (const HangFrame& f : t->frames) {
    if (f.symbol.empty() || is_system_module(f.module)) continue;
    if (f.symbol == "_start" || f.symbol.rfind("__libc_start", 0) == 0) continue;
    out.push_back(short_name(f.symbol));
    if (out.size() >= max) break;
  }
  return out;
}

std::optional<HangCollective> newest_in_flight(const RankHang& r) {
  std::optional<HangCollective> best;
  for (const HangCollective& c : r.in_flight)
    if (!best || c.host_start_ns > best->host_start_ns) best = c;
  return best;
}

std::string join(const std::vector<std::string>& xs, const char* sep) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? sep : "") + xs[i];
  return s;
}

std::string place(const HangGroup& g) {
  std::vector<std::string> parts;
  if (g.collective) {
    std::string c = g.collective->func;
    if (!g.collective->p2p) c += fmt::format(" seq {}", g.collective->seq);
    if (!g.section.empty()) c += " (section " + g.section + ")";
    parts.push_back(c);
  } else if (!g.section.empty()) {
    parts.push_back("section " + g.section);
  }
  if (!g.where.empty()) parts.push_back("in " + join(g.where, " \u2190 "));
  return parts.empty() ? "an unknown place (no stack, no open section)" : join(parts, ", ");
}

std::string ranks_word(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks);
}

// Decides which groups are behind: collectives first (a rank that has not started the
// collective the others wait in), else the minority against a single largest group.
std::string mark_behind(std::vector<HangGroup>& groups, const HangSet& set) {
  std::map<int, int64_t> started;  // rank -> seq of the newest collective started
  std::set<std::string> comms;
  bool any_nccl = false;
  for (const RankHang& r : set.ranks) {
    any_nccl = any_nccl || r.nccl_active;
    if (r.last_started && !r.last_started->p2p) {
      started[r.rank] = static_cast<int64_t>(r.last_started->seq);
      comms.insert(r.last_started->comm);
    }
  }
  if (any_nccl && comms.size() == 1 && !started.empty()) {
    int64_t newest = -1;
    for (auto& [rank, seq] : started) newest = std::max(newest, seq);
    bool some_behind = false;
    for (HangGroup& g : groups)
      for (int rank : g.ranks) {
        auto it = started.find(rank);
        if (it == started.end() || it->second < newest) g.behind = some_behind = true;
      }
    if (some_behind) return fmt::format("ranks that have not started collective seq {} the others are in", newest);
  }
  if (groups.size() < 2) return "all reporting ranks stand at the same place";
  if (groups[0].ranks.size() == groups[1].ranks.size())
    return "no majority: the groups are equally large, so no rank is named as behind";
  for (size_t i = 1; i < groups.size(); ++i) groups[i].behind = true;
  return "the ranks outside the largest group";
}

}  // namespace

std::string format_ranks(const std::vector<int>& in) {
  std::vector<int> r = in;
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string s;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? std::to_string(r[i]) : fmt::format("{}\u2013{}", r[i], r[j]);
    i = j + 1;
  }
  return s;
}

std::vector<std::string> find_hang_reports(const std::string& dir) {
  std::vector<std::string> files = regular_files_named(dir, is_hang_report_name);
  if (!files.empty()) return files;
  // An output directory: the run directory with the newest hang report.
  std::error_code ec;
  fs::file_time_type best_time = fs::file_time_type::min();
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    std::vector<std::string> sub = regular_files_named(it->path().string(), is_hang_report_name);
    for (const std::string& f : sub) {
      auto t = fs::last_write_time(f, ec);
      if (!ec && t > best_time) {
        best_time = t;
        files = sub;
      }
    }
  }
  return files;
}

RankHang parse_hang_report(const json& j, const std::string& path) {
  if (!j.is_object() || j.value("schema", "") != "laggard-hang")
    throw std::runtime_error("not a laggard hang report (schema is not \"laggard-hang\")");
  RankHang r;
  r.path = path;
  r.rank = checked_number<int>(j.at("rank"), "rank");
  if (j.contains("world_size") && j["world_size"].is_number_integer()) r.world_size = checked_number<int>(j["world_size"], "world_size");
  r.index = number_or<int>(j, "index", 0);
  r.run_id = j.value("run_id", "");
  r.host = j.value("host", "");
  r.pid = number_or<long>(j, "pid", 0);
  r.unwinder = j.value("unwinder", "");
  if (j.contains("python") && j["python"].is_string()) r.python = j["python"].get<std::string>();
  r.written_ns = number_or<int64_t>(j, "written_ns", 0);
  r.last_progress_ns = number_or<int64_t>(j, "last_progress_ns", 0);
  r.hang_s = j.value("hang_s", 0.0);
  for (const json& t : j.value("threads", json::array())) {
    HangThread ht;
    ht.tid = number_or<unsigned>(t, "tid", 0);
    ht.name = t.value("name", "");
    ht.status = t.value("status", "");
    ht.main = t.value("main", false);
    for (const json& f : t.value("frames", json::array())) {
      HangFrame hf;
      hf.pc = number_or<uint64_t>(f, "pc", 0);
      hf.module_base = number_or<uint64_t>(f, "module_base", 0);
      hf.offset = number_or<uint64_t>(f, "offset", 0);
      hf.module = f.value("module", "");
      hf.symbol = f.value("symbol", "");
      ht.frames.push_back(std::move(hf));
    }
    for (const json& s : t.value("sections", json::array())) ht.sections.push_back(s.value("name", ""));
    r.threads.push_back(std::move(ht));
  }
  if (const json& n = j.value("nccl", json::object()); n.is_object()) {
    r.nccl_active = n.value("active", false);
    for (const json& c : n.value("in_flight", json::array())) r.in_flight.push_back(parse_collective(c));
    if (n.contains("last_started") && n["last_started"].is_object()) r.last_started = parse_collective(n["last_started"]);
    if (n.contains("last_completed") && n["last_completed"].is_object())
      r.last_completed = parse_collective(n["last_completed"]);
  }
  return r;
}

HangSet read_hang_reports(const std::string& dir) { return read_hang_reports(find_hang_reports(dir)); }

HangSet read_hang_reports(const std::vector<std::string>& files) {
  HangSet set;
  std::map<int, RankHang> newest;
  for (const std::string& path : files) {
    try {
      std::ifstream in(path);
      RankHang r = parse_hang_report(json::parse(in), path);
      auto it = newest.find(r.rank);
      if (it == newest.end() || r.written_ns > it->second.written_ns) newest[r.rank] = std::move(r);
    } catch (const std::exception& e) {
      set.problems.push_back(fmt::format("{}: skipped: {}", path, e.what()));
    }
  }
  for (auto& [rank, r] : newest) {
    set.world_size = std::max(set.world_size, r.world_size);
    set.ranks.push_back(std::move(r));
  }
  return set;
}

void symbolize_hangs(HangSet& set) {
  // module -> frames to look up (address in the file's terms)
  std::map<std::string, std::vector<std::pair<HangFrame*, uint64_t>>> by_module;
  for (RankHang& r : set.ranks)
    for (HangThread& t : r.threads)
      for (size_t i = 0; i < t.frames.size(); ++i) {
        HangFrame& f = t.frames[i];
        if (f.module.empty() || is_system_module(f.module)) continue;
        uint64_t pc = i == 0 ? f.pc : f.pc - 1;  // a return address points after its call
        by_module[f.module].push_back({&f, pc});
      }
  for (auto& [module, frames] : by_module) {
    // ET_EXEC files are linked at their run-time address; others (PIE, .so) relative to the base.
    unsigned char hdr[18] = {};
    int module_fd = open_module(module, hdr);
    if (module_fd < 0) continue;
    if (hdr[0] != 0x7f || hdr[1] != 'E') {
      ::close(module_fd);
      continue;
    }
    bool exec = hdr[16] == 2;  // e_type == ET_EXEC (little endian)
    // -f: function names too, for frames the report could not name in-process (a report
    // written before the watchdog named its frames).
    std::vector<std::string> argv = {"addr2line", "-f", "-C", "-e", fmt::format("/proc/self/fd/{}", module_fd)};
    for (auto& [f, pc] : frames) argv.push_back(fmt::format("0x{:x}", exec ? pc : pc - f->module_base));
    fcntl(module_fd, F_SETFD, 0);  // addr2line reads the file through this descriptor
    std::string text;
    int status = run_program(argv, &text);
    ::close(module_fd);
    if (status != 0) continue;  // no addr2line here: names stay
    std::istringstream lines(text);
    std::string function, line;
    for (auto& [f, pc] : frames) {
      if (!std::getline(lines, function) || !std::getline(lines, line)) break;
      if (f->symbol.empty() && function != "??") f->symbol = function;
      size_t colon = line.rfind(':');
      if (line.rfind("??", 0) == 0 || colon == std::string::npos) continue;
      int n = std::atoi(line.c_str() + colon + 1);
      if (n <= 0) continue;
      f->file = line.substr(0, colon);
      f->line = n;
    }
  }
}

HangAnalysis analyze_hangs(const HangSet& set) {
  HangAnalysis a;
  std::map<std::string, size_t> by_key;
  for (const RankHang& r : set.ranks) {
    const HangThread* t = representative(r);
    HangGroup g;
    if (t && !t->sections.empty()) g.section = t->sections.back();
    g.collective = newest_in_flight(r);
    g.where = app_frames(t, 4);
    std::string key = g.section + "\n" + join(g.where, "\n");
    if (g.collective) key += fmt::format("\n{} {} {}", g.collective->comm, g.collective->func, g.collective->seq);
    auto [it, added] = by_key.emplace(key, a.groups.size());
    if (added) a.groups.push_back(std::move(g));
    a.groups[it->second].ranks.push_back(r.rank);
  }
  std::stable_sort(a.groups.begin(), a.groups.end(),
                   [](const HangGroup& x, const HangGroup& y) { return x.ranks.size() > y.ranks.size(); });
  a.how = mark_behind(a.groups, set);
  std::vector<std::string> sentences;
  for (HangGroup& g : a.groups) {
    if (g.behind) {
      g.sentence = ranks_word(g.ranks) + (g.ranks.size() == 1 ? " is" : " are") + " still in " + place(g);
      a.behind.insert(a.behind.end(), g.ranks.begin(), g.ranks.end());
    } else {
      g.sentence = ranks_word(g.ranks) + (g.ranks.size() == 1 ? " waits" : " wait") + " in " + place(g);
    }
    sentences.push_back(g.sentence);
  }
  std::sort(a.behind.begin(), a.behind.end());
  std::set<int> have;
  for (const RankHang& r : set.ranks) have.insert(r.rank);
  for (int rank = 0; rank < set.world_size; ++rank)
    if (!have.count(rank)) a.missing.push_back(rank);
  a.summary = join(sentences, "; ");
  if (!a.missing.empty())
    a.summary += "; no hang report from " + ranks_word(a.missing) + " (still progressing, or gone)";
  return a;
}

namespace {

std::string frame_text(const HangFrame& f) {
  std::string s = f.symbol.empty() ? fmt::format("0x{:x}", f.pc) : fmt::format("{}+0x{:x}", f.symbol, f.offset);
  if (!f.file.empty()) s += fmt::format(" at {}:{}", f.file, f.line);
  if (!f.module.empty()) s += " [" + base_name(f.module) + "]";
  return s;
}

void thread_text(const HangThread& t, std::ostream& out) {
  out << fmt::format("  thread {} \"{}\"{}: {}", t.tid, t.name, t.main ? " (main)" : "", t.status);
  if (!t.sections.empty()) out << ", sections " << join(t.sections, " > ");
  out << '\n';
  for (size_t i = 0; i < t.frames.size(); ++i) out << fmt::format("    #{:<2} {}\n", i, frame_text(t.frames[i]));
}

}  // namespace

void render_stacks_text(const HangSet& set, const HangAnalysis& a, std::ostream& out) {
  if (set.ranks.empty()) {
    out << "no hang reports\n";
    return;
  }
  const RankHang& first = set.ranks.front();
  out << fmt::format("laggard stacks: {} of {} ranks wrote a hang report (run {}, LAGGARD_HANG_S={})\n",
                     set.ranks.size(), set.world_size > 0 ? std::to_string(set.world_size) : "?", first.run_id,
                     first.hang_s);
  for (const HangGroup& g : a.groups) out << "  " << g.sentence << (g.behind ? "   <- behind" : "") << '\n';
  if (!a.missing.empty()) out << "  no hang report from " << ranks_word(a.missing) << " (still progressing, or gone)\n";
  out << (a.behind.empty() ? "behind: not determined (" + a.how + ")\n"
                           : "behind: " + ranks_word(a.behind) + " (" + a.how + ")\n");
  for (const std::string& p : set.problems) out << "warning: " << p << '\n';
  // Full stacks for the ranks behind, and for one rank of each other group.
  for (const HangGroup& g : a.groups) {
    std::vector<int> shown = g.behind ? g.ranks : std::vector<int>{g.ranks.front()};
    for (int rank : shown)
      for (const RankHang& r : set.ranks) {
        if (r.rank != rank) continue;
        out << fmt::format("\nrank {} (host {}, pid {}, stalled {:.1f} s; {}):\n", r.rank, r.host, r.pid,
                           (r.written_ns - r.last_progress_ns) / 1e9, base_name(r.path));
        for (const HangThread& t : r.threads)
          if (t.status != "watchdog") thread_text(t, out);
        for (const HangCollective& c : r.in_flight)
          out << fmt::format("  NCCL in flight: {} {} on {}, host {}, GPU channels {}/{} started, {} stopped\n", c.func,
                             c.p2p ? "peer " + std::to_string(c.peer) : "seq " + std::to_string(c.seq),
                             c.comm_name.empty() ? c.comm : c.comm_name, c.host_stopped ? "enqueued" : "enqueueing",
                             c.channels_started, c.channels, c.channels_stopped);
        if (!r.python.empty()) out << "  Python: " << r.python << '\n';
        if (r.unwinder != "libunwind") out << "  native stacks: " << r.unwinder << '\n';
      }
  }
}

json render_stacks_json(const HangSet& set, const HangAnalysis& a) {
  json j;
  j["world_size"] = set.world_size > 0 ? json(set.world_size) : json(nullptr);
  j["summary"] = a.summary;
  j["behind"] = a.behind;
  j["behind_rule"] = a.how;
  j["missing"] = a.missing;
  j["problems"] = set.problems;
  j["groups"] = json::array();
  for (const HangGroup& g : a.groups) {
    json jg = {{"ranks", g.ranks}, {"behind", g.behind}, {"section", g.section}, {"where", g.where},
               {"sentence", g.sentence}};
    jg["collective"] = g.collective ? json{{"func", g.collective->func}, {"seq", g.collective->seq},
                                           {"comm", g.collective->comm}}
                                    : json(nullptr);
    j["groups"].push_back(jg);
  }
  j["ranks"] = json::array();
  for (const RankHang& r : set.ranks) {
    json jr = {{"rank", r.rank}, {"file", r.path}, {"host", r.host}, {"pid", r.pid},
               {"stalled_s", (r.written_ns - r.last_progress_ns) / 1e9}, {"unwinder", r.unwinder}};
    jr["python"] = r.python.empty() ? json(nullptr) : json(r.python);
    jr["threads"] = json::array();
    for (const HangThread& t : r.threads) {
      json jt = {{"tid", t.tid}, {"name", t.name}, {"main", t.main}, {"status", t.status}, {"sections", t.sections}};
      jt["frames"] = json::array();
      for (const HangFrame& f : t.frames) {
        json jf = {{"symbol", f.symbol}, {"offset", f.offset}, {"module", f.module}, {"pc", f.pc}};
        jf["file"] = f.file.empty() ? json(nullptr) : json(f.file);
        jf["line"] = f.line ? json(f.line) : json(nullptr);
        jt["frames"].push_back(jf);
      }
      jr["threads"].push_back(jt);
    }
    j["ranks"].push_back(jr);
  }
  return j;
}

}  // namespace laggard::report

namespace laggard::report {

namespace {
HangSet hangs_of(const RunModel& run) {
  return run.hang_reports ? read_hang_reports(*run.hang_reports) : read_hang_reports(run.dir);
}
}  // namespace

void mention_hangs_text(const RunModel& run, std::ostream& out) {
  const std::string& run_dir = run.dir;
  HangSet set = hangs_of(run);
  if (set.ranks.empty()) return;
  HangAnalysis a = analyze_hangs(set);
  out << fmt::format("\nHang reports: {} rank(s) stopped making progress for LAGGARD_HANG_S={} s: {}\n",
                     set.ranks.size(), set.ranks.front().hang_s, a.summary);
  out << "  stacks of every thread: laggard stacks " << run_dir << '\n';
}

json mention_hangs_json(const RunModel& run) {
  const std::string& run_dir = run.dir;
  HangSet set = hangs_of(run);
  if (set.ranks.empty()) return nullptr;
  HangAnalysis a = analyze_hangs(set);
  std::vector<int> ranks;
  for (const RankHang& r : set.ranks) ranks.push_back(r.rank);
  return {{"count", set.ranks.size()}, {"ranks", ranks}, {"behind", a.behind}, {"summary", a.summary},
          {"see", "laggard stacks " + run_dir}};
}

}  // namespace laggard::report
