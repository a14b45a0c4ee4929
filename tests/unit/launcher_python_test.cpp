// Issue 25: `laggard run` finds laggard's Python directory (sitecustomize.py, the automatic PyTorch
// sections) beside liblaggard.so in the build tree and in both installed layouts the launcher
// looks for the library in (lib/liblaggard.so, lib/laggard/liblaggard.so), or where
// LAGGARD_PYTHON_DIR says.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "launcher.h"
#include "temp_dir.h"

namespace laggard::cli {
namespace launcher_python_test {

namespace fs = std::filesystem;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "";
}

TEST(LauncherPython, FoundBesideTheLibraryInEveryLayout) {
  unsetenv("LAGGARD_PYTHON_DIR");
  laggard::testing::TempDir tmp;
  const fs::path build = tmp.path / "build", prefix = tmp.path / "usr";
  touch(build / "liblaggard.so");
  touch(build / "python" / "sitecustomize.py");
  EXPECT_EQ(find_python_dir((build / "liblaggard.so").string()), (build / "python").string());
  touch(prefix / "lib" / "laggard" / "liblaggard.so");  // lib/laggard/liblaggard.so
  touch(prefix / "lib" / "laggard" / "python" / "sitecustomize.py");
  EXPECT_EQ(find_python_dir((prefix / "lib" / "laggard" / "liblaggard.so").string()),
            (prefix / "lib" / "laggard" / "python").string());
  touch(prefix / "lib" / "liblaggard.so");  // lib/liblaggard.so
  EXPECT_EQ(find_python_dir((prefix / "lib" / "liblaggard.so").string()),
            (prefix / "lib" / "laggard" / "python").string());
  EXPECT_EQ(find_python_dir((tmp.path / "elsewhere" / "liblaggard.so").string()), "");
}

TEST(LauncherPython, EnvironmentNamesIt) {
  laggard::testing::TempDir tmp;
  touch(tmp.path / "py" / "sitecustomize.py");
  setenv("LAGGARD_PYTHON_DIR", (tmp.path / "py").c_str(), 1);
  EXPECT_EQ(find_python_dir("/nonexistent/liblaggard.so"), (tmp.path / "py").string());
  setenv("LAGGARD_PYTHON_DIR", tmp.path.c_str(), 1);  // no sitecustomize.py there
  EXPECT_EQ(find_python_dir("/nonexistent/liblaggard.so"), "");
  unsetenv("LAGGARD_PYTHON_DIR");
}

}  // namespace launcher_python_test
}  // namespace laggard::cli
