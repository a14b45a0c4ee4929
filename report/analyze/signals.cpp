#include "signals.h"

#include <csignal>
#include <cstring>

namespace laggard::report {

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return (abbrev ? std::string("SIG") + abbrev : std::string("signal")) + " (" + std::to_string(sig) + ")";
}

}  // namespace laggard::report
