// LAGGARD_FILE_FORMAT=binary end to end (schema v5, docs/schema.md "Version 5: binary kernel
// records"), the default since issue 14: the preloaded library appends frames, `laggard report`
// reads them like JSON, and `laggard cat` shows them as the JSON segment they stand for.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "harness.h"

namespace laggard::test {
namespace binary_files_test {

using nlohmann::json;

class BinaryFiles : public Scratch {
 protected:
  ProcessOptions env(const char* format) {
    ProcessOptions o = single_rank(out(), *format ? format : "default");
    o.env["LAGGARD_CUPTI_PATH"] = kFakeCuda;
    if (*format) o.env["LAGGARD_FILE_FORMAT"] = format;  // "": the default
    return o;
  }
  // The rank files of one run id, by name.
  std::vector<std::filesystem::path> files_of(const std::string& run) const {
    std::vector<std::filesystem::path> files;
    for (const auto& f : rank_files())
      if (f.parent_path().filename() == run) files.push_back(f);
    std::sort(files.begin(), files.end());
    return files;
  }
  json gpu_rank(const char* format) {
    ProcessResult r = run_process({kFakeCudaApp, "--cuda", kFakeCuda, "--steps", "6", "--kernels", "4", "--outside",
                                   "2"},
                                  env(format));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    json rep = report({"--run", format});
    for (const json& p : rep["problems"])  // the fake app's NCCL kernels without NCCL are expected
      EXPECT_EQ(p["kind"], "nccl_plugin_not_loaded") << rep["problems"].dump();
    return rep["gpu"]["ranks"][0];
  }
};

TEST_F(BinaryFiles, TheReportOfABinaryRunMatchesTheJsonOne) {
  json from_json = gpu_rank("json");
  json from_binary = gpu_rank("binary");
  bool lgr = false, json_file = false;
  for (const auto& f : rank_files()) {
    if (f.parent_path().filename() != "binary") continue;
    lgr |= f.extension() == ".lgr";
    json_file |= f.extension() == ".json";
  }
  EXPECT_TRUE(lgr);
  EXPECT_FALSE(json_file);
  EXPECT_EQ(from_binary["cupti"], "on");
  for (const char* key : {"kernels", "nccl_kernels", "memcpy_count"})
    EXPECT_EQ(from_binary[key], from_json[key]) << key;
  EXPECT_EQ(from_binary["kernels"], 24 + 24 + 12);
}

// Every key, and the type of every value, with arrays by their first element: what two captures
// of the same program share whatever their timings.
json skeleton(const json& j) {
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : j.items()) out[key] = skeleton(value);
    return out;
  }
  if (j.is_array()) return j.empty() ? json::array() : json::array({skeleton(j[0])});
  return j.type_name();
}

// One window per capture, closed at exit (a flush interval longer than the run): how many windows a
// 0.1 s flush cuts depends on the load, and a window's optional parts (late GPU records) with it.
TEST_F(BinaryFiles, TheDefaultIsBinaryFramesThatCatShowsWithEveryFieldOfTheJsonForm) {
  for (const char* format : {"", "json"}) {
    ProcessOptions o = env(format);
    o.env["LAGGARD_FLUSH_S"] = "86400";
    ProcessResult r = run_process({kFakeCudaApp, "--cuda", kFakeCuda, "--steps", "6", "--kernels", "4"}, o);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::vector<std::filesystem::path> binary = files_of("default"), json_files = files_of("json");
  ASSERT_EQ(binary.size(), 1u);
  ASSERT_EQ(json_files.size(), 1u);
  EXPECT_EQ(binary[0].extension(), ".lgr");  // was: .json, rewritten at every flush
  EXPECT_EQ(json_files[0].extension(), ".json");
  json from_binary = rank_file_json(binary[0]), from_json = rank_file_json(json_files[0]);
  ASSERT_TRUE(from_binary.is_object());
  // Documented differences between two runs: the run id and times, never a field.
  EXPECT_EQ(from_binary["run_id"], "default");
  EXPECT_EQ(from_json["run_id"], "json");
  EXPECT_EQ(from_binary["windows"].size(), 1u);
  EXPECT_EQ(from_json["windows"].size(), 1u);
  json kernel_window_b, kernel_window_j;
  for (const json& w : from_binary["windows"])
    if (w.contains("gpu") && !w["gpu"]["records"]["kind"].empty()) kernel_window_b = w;
  for (const json& w : from_json["windows"])
    if (w.contains("gpu") && !w["gpu"]["records"]["kind"].empty()) kernel_window_j = w;
  ASSERT_FALSE(kernel_window_b.is_null()) << from_binary.dump();
  EXPECT_EQ(skeleton(kernel_window_b), skeleton(kernel_window_j));
  from_binary.erase("windows");
  from_json.erase("windows");
  EXPECT_EQ(skeleton(from_binary), skeleton(from_json));
}

// The synthetic generator writes through the library's own writer, deterministically: the same
// run in both formats must `cat` to the same text, file by file.
TEST_F(BinaryFiles, CatShowsTheSameRunTheSameInBothFormats) {
  const std::string gen = kBin + "/laggard-gen-synthetic";
  for (const char* format : {"binary", "json"}) {
    ProcessResult g = run_process({gen, "--out", out() + "/" + format, "--ranks", "2", "--kernels", "6", "--steps",
                                   "5", "--steps-per-window", "2", "--seed", "3", "--format", format},
                                  clean_env());
    ASSERT_EQ(g.exit_code, 0) << g.err;
  }
  std::vector<std::filesystem::path> binary = files_of("binary"), json_files = files_of("json");
  ASSERT_EQ(binary.size(), 2u);
  ASSERT_EQ(json_files.size(), binary.size());
  for (size_t i = 0; i < binary.size(); ++i) {
    EXPECT_EQ(binary[i].extension(), ".lgr");
    EXPECT_EQ(binary[i].stem(), json_files[i].stem());
    std::string b = rank_file_text(binary[i]), j = rank_file_text(json_files[i]);
    EXPECT_FALSE(b.empty());
    EXPECT_EQ(b, j) << binary[i];
  }
}

}  // namespace
}  // namespace laggard::test
