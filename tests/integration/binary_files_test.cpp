// LAGGARD_FILE_FORMAT=binary end to end (schema v5, docs/schema.md "Version 5: binary kernel
// records"): the preloaded library appends frames, and `laggard report` reads them like JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness.h"

namespace laggard::test {
namespace {

using nlohmann::json;

class BinaryFiles : public Scratch {
 protected:
  ProcessOptions env(const char* format) {
    ProcessOptions o = clean_env();
    o.env["LD_PRELOAD"] = kLibrary;
    o.env["RANK"] = "0";
    o.env["WORLD_SIZE"] = "1";
    o.env["LAGGARD_OUT"] = out();
    o.env["LAGGARD_RUN_ID"] = format;
    o.env["LAGGARD_FLUSH_S"] = "0.1";
    o.env["LAGGARD_CUPTI_PATH"] = kFakeCuda;
    o.env["LAGGARD_FILE_FORMAT"] = format;
    return o;
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

}  // namespace
}  // namespace laggard::test
