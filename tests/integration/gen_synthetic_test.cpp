// laggard-gen-synthetic (bench/gen_synthetic): a small synthetic run in the real file format,
// read back by `laggard report --format json`: the injected straggler is the one blamed and
// nothing else is, and the same seed gives byte-identical files. The CI smoke of issue 14.
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness.h"

namespace laggard::test {
namespace gen_synthetic_test {

const std::string kGen = kBin + "/laggard-gen-synthetic";

class GenSynthetic : public Scratch {
 protected:
  ProcessResult generate(const std::string& dir, const std::vector<std::string>& extra, const std::string& seed = "7") {
    std::vector<std::string> argv = {kGen, "--out", dir, "--ranks", "8", "--kernels", "20", "--steps", "10",
                                     "--ranks-per-host", "4", "--steps-per-window", "4", "--seed", seed};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv, clean_env());
  }

  nlohmann::json report_of(const std::string& dir) {
    ProcessResult r = run_process({kLaggard, "report", dir, "--format", "json"}, clean_env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
};

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    files[e.path().filename().string()] = s.str();
  }
  return files;
}

std::set<int> blamed_ranks(const nlohmann::json& rep) {
  std::set<int> ranks;
  for (const auto& f : rep["verdict"]["findings"])
    if (f.contains("rank") && f["rank"].is_number()) ranks.insert(f["rank"].get<int>());
  for (const auto& s : rep["stragglers"]) ranks.insert(s["rank"].get<int>());
  return ranks;
}

TEST_F(GenSynthetic, InjectedSlowSectionIsTheOnlyOneBlamed) {
  ProcessResult gen = generate(out(), {"--straggler", "rank=5,section=fwd,factor=1.5"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.out.find("ranks=8 kernels=20 steps=10"), std::string::npos) << gen.out;
  EXPECT_NE(gen.out.find("records=1680"), std::string::npos) << gen.out;  // 8 x 10 x (20 + all-reduce)
  nlohmann::json rep = report_of(out());
  ASSERT_FALSE(rep.is_discarded());
  EXPECT_TRUE(rep["problems"].empty()) << rep["problems"].dump();
  EXPECT_EQ(rep["world_size"], 8);
  EXPECT_EQ(rep["steps"]["count"], 10);
  ASSERT_FALSE(rep["verdict"]["findings"].empty()) << rep["verdict"].dump();
  const auto& top = rep["verdict"]["findings"][0];
  EXPECT_EQ(top["rank"], 5) << top.dump();
  EXPECT_EQ(blamed_ranks(rep), std::set<int>{5}) << rep["verdict"].dump() << rep["stragglers"].dump();
  // The file format is the real one: GPU records and NCCL collectives reached the analyses.
  EXPECT_TRUE(rep["jitter"]["available"].get<bool>()) << rep["jitter"].dump();
  EXPECT_EQ(rep["jitter"]["kernels"].size(), 21u);
}

TEST_F(GenSynthetic, LateCollectiveAndSlowGpuAreBlamedAlone) {
  for (const auto& [straggler, rank] : std::vector<std::pair<std::string, int>>{{"rank=3,delay_ms=1", 3},
                                                                               {"rank=6,factor=1.2", 6}}) {
    const std::string dir_of_case = dir + "/r" + std::to_string(rank);
    ProcessResult gen = generate(dir_of_case, {"--straggler", straggler});
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    nlohmann::json rep = report_of(dir_of_case);
    ASSERT_FALSE(rep.is_discarded());
    EXPECT_EQ(blamed_ranks(rep), std::set<int>{rank}) << straggler << rep["verdict"].dump();
  }
}

TEST_F(GenSynthetic, HealthyRunBlamesNobody) {
  ProcessResult gen = generate(out(), {});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  nlohmann::json rep = report_of(out());
  ASSERT_FALSE(rep.is_discarded());
  EXPECT_EQ(blamed_ranks(rep), std::set<int>{}) << rep["verdict"].dump() << rep["stragglers"].dump();
}

TEST_F(GenSynthetic, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::vector<std::string> s = {"--straggler", "rank=2,delay_ms=3"};
  ASSERT_EQ(generate(dir + "/a", s).exit_code, 0);
  ASSERT_EQ(generate(dir + "/b", s).exit_code, 0);
  ASSERT_EQ(generate(dir + "/c", s, "8").exit_code, 0);
  auto a = files_of(dir + "/a"), b = files_of(dir + "/b"), c = files_of(dir + "/c");
  EXPECT_EQ(a.size(), 8u);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
}

TEST_F(GenSynthetic, SummariesOnlyKeepsStatisticsWithoutRecords) {
  ASSERT_EQ(generate(out(), {"--summaries-only"}).exit_code, 0);
  nlohmann::json rep = report_of(out());
  ASSERT_FALSE(rep.is_discarded());
  EXPECT_EQ(rep["ranks"].size(), 8u);
  EXPECT_FALSE(rep["jitter"]["available"].get<bool>());  // no per-kernel records to compare
}

// --format binary (the default) writes schema v5 frames, --format json the JSON segments; the
// report is the same from either.
TEST_F(GenSynthetic, BinaryAndJsonFormatsGiveTheSameReport) {
  const std::vector<std::string> s = {"--straggler", "rank=5,section=fwd,factor=1.3"};
  std::vector<std::string> bin = s, json = s;
  bin.insert(bin.end(), {"--format", "binary"});
  json.insert(json.end(), {"--format", "json"});
  ASSERT_EQ(generate(dir + "/bin", bin).exit_code, 0);
  ASSERT_EQ(generate(dir + "/json", json).exit_code, 0);
  for (const auto& [name, bytes] : files_of(dir + "/bin")) EXPECT_EQ(bytes.substr(0, 4), "LGF5") << name;
  for (const auto& [name, bytes] : files_of(dir + "/json")) EXPECT_EQ(bytes.substr(0, 1), "{") << name;
  nlohmann::json a = report_of(dir + "/bin"), b = report_of(dir + "/json");
  ASSERT_FALSE(a.is_discarded());
  ASSERT_FALSE(b.is_discarded());
  for (const char* part : {"verdict", "stragglers", "ranks", "gpu"}) EXPECT_EQ(a[part], b[part]) << part;
  EXPECT_EQ(blamed_ranks(a), std::set<int>{5});
}

// `laggard report` keeps compact GPU records (GpuSpan) unless the HTML page needs full ones
// (--html): both must give the same report, byte for byte (issue 14).
TEST_F(GenSynthetic, CompactAndFullGpuRecordsGiveTheSameReport) {
  ASSERT_EQ(generate(out(), {"--straggler", "rank=5,section=fwd,factor=1.3", "--straggler", "rank=2,delay_ms=2"})
                .exit_code,
            0);
  ProcessResult compact = run_process({kLaggard, "report", out(), "--format", "json"}, clean_env());
  ProcessResult full =
      run_process({kLaggard, "report", out(), "--format", "json", "--html", dir + "/page.html"}, clean_env());
  ASSERT_EQ(compact.exit_code, 0) << compact.err;
  ASSERT_EQ(full.exit_code, 0) << full.err;
  nlohmann::json rep = nlohmann::json::parse(compact.out, nullptr, false);
  ASSERT_FALSE(rep.is_discarded());
  EXPECT_TRUE(rep["jitter"]["available"].get<bool>());
  EXPECT_TRUE(rep["breakdown"]["available"].get<bool>());
  EXPECT_EQ(compact.out, full.out);
}

TEST_F(GenSynthetic, BadStragglerIsAClearError) {
  ProcessResult r = generate(out(), {"--straggler", "rank=99,factor=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not below --ranks"), std::string::npos) << r.err;
  r = generate(out(), {"--straggler", "rank=1,speed=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad straggler field 'speed=2'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace laggard::test
