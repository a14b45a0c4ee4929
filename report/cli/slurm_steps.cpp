#include "slurm_steps.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "subprocess.h"

namespace laggard::cli {
namespace fs = std::filesystem;
namespace {

std::string short_name(const std::string& host) { return host.substr(0, host.find('.')); }

// The value of "KEY=value" among a line's space-separated fields; empty when absent.
std::string field(const std::string& line, const std::string& key) {
  std::istringstream words(line);
  for (std::string w; words >> w;)
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  return "";
}

// A process's parent pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces
// and parentheses, so the fields start after the last ')'); -1 if unreadable.
long parent_of(const fs::path& stat_file) {
  std::ifstream in(stat_file);
  std::string text;
  if (!std::getline(in, text)) return -1;
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  long ppid = -1;
  rest >> state >> ppid;
  return rest ? ppid : -1;
}

// The srun processes among `pids` (/proc/PID/comm).
std::set<long> sruns_among(const std::set<long>& pids) {
  std::set<long> sruns;
  for (long pid : pids) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "srun") sruns.insert(pid);
  }
  return sruns;
}

std::string own_host() {
  char buf[256] = {0};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

}  // namespace

std::vector<SrunStep> steps_of_sruns(const std::string& scontrol_text, const std::string& host,
                                     const std::set<long>& pids) {
  std::vector<SrunStep> steps;
  std::istringstream lines(scontrol_text);
  for (std::string line; std::getline(lines, line);) {
    std::string step = field(line, "StepId"), srun = field(line, "SrunHost:Pid");
    size_t colon = srun.rfind(':');
    if (step.empty() || colon == std::string::npos) continue;
    char* end = nullptr;
    long pid = std::strtol(srun.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || !pids.count(pid) || short_name(srun.substr(0, colon)) != short_name(host)) continue;
    steps.push_back({step, pid});
  }
  return steps;
}

std::set<long> descendants_of(long pid) {
  std::multimap<long, long> children;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (long ppid = parent_of(it->path() / "stat"); ppid > 0) children.emplace(ppid, std::stol(name));
  }
  std::set<long> found;
  std::vector<long> todo = {pid};
  while (!todo.empty()) {
    long p = todo.back();
    todo.pop_back();
    auto [from, to] = children.equal_range(p);
    for (auto it = from; it != to; ++it)
      if (found.insert(it->second).second) todo.push_back(it->second);
  }
  return found;
}

std::set<long> terminate_our_srun_steps() {
  // Slurm is asked only when an srun runs below us: scontrol may wait long for a controller.
  std::set<long> ours = sruns_among(descendants_of(static_cast<long>(getpid())));
  if (ours.empty()) return {};
  std::string text;
  if (run_program({"scontrol", "show", "step", "--oneliner"}, &text) != 0) return {};
  std::set<long> handled;
  for (const SrunStep& s : steps_of_sruns(text, own_host(), ours))
    if (run_program({"scancel", "--signal=TERM", s.step}) == 0) handled.insert(s.srun_pid);
  return handled;
}

}  // namespace laggard::cli
