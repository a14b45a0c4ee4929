// Unit conversions shared by analyses and renderers: files hold nanoseconds, reports show milliseconds.
#pragma once

namespace laggard::report {

constexpr double ms(double ns) { return ns / 1e6; }

}  // namespace laggard::report
