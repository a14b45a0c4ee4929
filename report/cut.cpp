#include "cut.h"

#include <regex>
#include <sstream>
#include <stdexcept>

namespace laggard::report {

std::set<int> parse_rank_list(const std::string& text) {
  std::set<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t dash = item.find('-', 1);
    try {
      size_t used = 0;
      int lo = std::stoi(item, &used);
      int hi = lo;
      if (dash != std::string::npos) hi = std::stoi(item.substr(dash + 1));
      else if (used != item.size()) throw std::invalid_argument("");
      if (lo < 0 || hi < lo || hi - lo > 1'000'000) throw std::invalid_argument("");
      for (int r = lo; r <= hi; ++r) out.insert(r);
    } catch (const std::exception&) {
      throw std::invalid_argument("bad rank list '" + text + "' (e.g. 0,3,5-7)");
    }
  }
  if (out.empty()) throw std::invalid_argument("empty rank list");
  return out;
}

std::pair<int, int> parse_step_range(const std::string& text) {
  size_t sep = text.find_first_of(":-", 1);
  try {
    if (sep == std::string::npos) {
      int k = std::stoi(text);
      if (k < 0) throw std::invalid_argument("");
      return {k, k};
    }
    int a = std::stoi(text.substr(0, sep)), b = std::stoi(text.substr(sep + 1));
    if (a < 0 || b < a) throw std::invalid_argument("");
    return {a, b};
  } catch (const std::exception&) {
    throw std::invalid_argument("bad step range '" + text + "' (e.g. 10:20)");
  }
}

RunModel apply_cut(const RunModel& model, const Cut& cut) {
  if (cut.ranks.empty() && cut.hosts.empty() && cut.sections.empty()) return model;
  std::optional<std::regex> re;
  if (!cut.sections.empty()) {
    try {
      re.emplace(cut.sections, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw std::invalid_argument("bad section regex '" + cut.sections + "': " + e.what());
    }
  }
  RunModel out = model;
  out.ranks.clear();
  for (const RankData& r : model.ranks) {
    if (!cut.ranks.empty() && !cut.ranks.count(r.rank)) continue;
    if (!cut.hosts.empty() && !cut.hosts.count(r.host)) continue;
    RankData copy = r;
    if (re) {
      for (CaptureWindow& w : copy.windows) {
        std::erase_if(w.sections, [&](const SectionWindow& s) { return !std::regex_search(s.name, *re); });
        std::erase_if(w.gpu, [&](const GpuActivity& a) {
          return a.section == StringTable::kNone || !std::regex_search(model.strings.at(a.section), *re);
        });
        std::erase_if(w.kernel_stats, [&](const KernelWindowStats& k) {
          return k.section == StringTable::kNone || !std::regex_search(model.strings.at(k.section), *re);
        });
      }
    }
    out.ranks.push_back(std::move(copy));
  }
  return out;
}

StepSet apply_cut(const StepSet& steps, const Cut& cut) {
  if (!cut.steps) return steps;
  StepSet out = steps;
  for (auto& rs : out.per_rank) {
    std::vector<Step> kept;
    for (const Step& s : rs)
      if (s.index >= cut.steps->first && s.index <= cut.steps->second) kept.push_back(s);
    rs = std::move(kept);
  }
  out.source += ", steps " + std::to_string(cut.steps->first) + "-" + std::to_string(cut.steps->second);
  return out;
}

}  // namespace laggard::report
