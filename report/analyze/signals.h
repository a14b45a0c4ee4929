#pragma once

#include <string>

namespace laggard::report {

// "SIGTERM (15)" for a signal number.
std::string signal_name(int sig);

}  // namespace laggard::report
