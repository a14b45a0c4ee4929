// libFuzzer target: the environment parsers of the injected library (LAGGARD_* settings and
// the launcher variables that give the rank and run id). The input is NAME=VALUE lines; names
// without a LAGGARD_ prefix are taken as they are (RANK, SLURM_PROCID, ...). Parsing must
// never fail: a bad value is a warning and the default.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "config.h"
#include "env.h"
#include "rank_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> vars;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos) {
      std::string value = line.substr(eq + 1);
      value = value.substr(0, value.find('\0'));  // environment values end at NUL
      vars[line.substr(0, eq)] = value;
    }
    pos = end + 1;
  }
  laggard::Env env = laggard::map_env(vars);
  laggard::ConfigResult c = laggard::parse_config(env);
  if (c.config.windows_per_file < 1 || c.config.max_occurrences < 1 || !(c.config.flush_s > 0) ||
      c.config.profiling_interval < 1)
    __builtin_trap();  // defaults must replace unusable values
  laggard::RankResult r = laggard::detect_rank(env, "host", 42);
  if (r.identity && (r.identity->run_id.empty() || r.identity->rank < 0)) __builtin_trap();
  return 0;
}
