// Issue 25: `laggard import kineto` on the traces PyTorch writes without Kineto (Debian's
// python3-torch 1.13): a bare JSON array in EventList.export_chrome_trace's fixed layout
// (torch/autograd/profiler_util.py, v1.13.1, lines 188-241), written here byte for byte as that
// exporter does, including its unescaped names. tests/integration/torch_test.cpp imports traces
// the real profiler wrote.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "import_kineto.h"
#include "import_torch_legacy.h"
#include "reader.h"
#include "steps.h"
#include "temp_dir.h"

namespace laggard::report {
namespace torch_legacy_import_test {

namespace fs = std::filesystem;

struct Ev {
  std::string name;
  long ts, dur;
};

// The exporter: '[' then each event as '%s' % (...) + ", ", the last ", " cut, then ']'.
std::string legacy_trace(const std::vector<Ev>& events, bool flows = false) {
  std::string out = "[";
  for (const Ev& e : events) {
    out += "{\"name\": \"" + e.name + "\", \"ph\": \"X\", \"ts\": " + std::to_string(e.ts) +
           ", \"dur\": " + std::to_string(e.dur) + ", \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}, ";
    if (flows)
      out += "{\"name\": \"" + e.name + "\", \"ph\": \"s\", \"ts\": " + std::to_string(e.ts) +
             ", \"tid\": 1, \"pid\": \"CPU functions\", \"id\": 0, \"cat\": \"cpu_to_cuda\", \"args\": {}}, ";
  }
  if (!events.empty()) out.resize(out.size() - 2);
  return out + "]";
}

// Three profiler steps of a DDP loop as 1.13's legacy exporter lists them (names from a real
// trace of torch 1.13.1 on gloo), with rank-dependent data loading time.
std::vector<Ev> three_steps(long load_us, const std::string& annotation = "data_load") {
  std::vector<Ev> ev;
  long t = 100;
  for (int k = 1; k <= 3; ++k) {
    const long step = load_us + 900;
    ev.push_back({"ProfilerStep#" + std::to_string(k), t, step});
    ev.push_back({"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 2, load_us});
    ev.push_back({annotation, t + 3, load_us - 2});
    ev.push_back({"aten::stack", t + 4, 20});
    ev.push_back({"DistributedDataParallel.forward", t + load_us + 10, 300});
    ev.push_back({"aten::linear", t + load_us + 20, 100});
    ev.push_back({"detach", t + load_us + 30, 1});
    ev.push_back({"aten::detach", t + load_us + 31, 1});
    ev.push_back({"AddmmBackward0", t + load_us + 400, 50});
    ev.push_back({"autograd::engine::evaluate_function: AddmmBackward0", t + load_us + 399, 52});
    ev.push_back({"gloo:all_reduce", t + load_us + 460, 200});
    ev.push_back({"Optimizer.step#SGD.step", t + load_us + 700, 100});
    t += step + 10;
  }
  return ev;
}

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::multiset<std::string> range_names(const ImportedRank& r) {
  std::multiset<std::string> out;
  for (const ImportedRange& x : r.ranges) out.insert(r.strings.at(x.name));
  return out;
}

TEST(TorchLegacyImport, RecordFunctionRangesAndStepsNotOperators) {
  laggard::testing::TempDir tmp;
  const fs::path f = tmp.path / "trace_rank2.json";
  spit(f, legacy_trace(three_steps(5000), true));
  ASSERT_TRUE(is_json_array_file(f.string()));
  const ImportedRank r = import_kineto(f.string());  // the Kineto importer hands it over
  EXPECT_EQ(r.format, "torch-legacy");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.rank_source, "file name");
  const auto names = range_names(r);
  EXPECT_EQ(names.count("ProfilerStep#2"), 1u);
  EXPECT_EQ(names.count("data_load"), 3u);
  EXPECT_EQ(names.count("Optimizer.step#SGD.step"), 3u);
  EXPECT_EQ(names.count("DistributedDataParallel.forward"), 3u);
  EXPECT_EQ(names.count("all_reduce@gloo"), 3u);  // a host-timed collective (host_collectives.h)
  for (const char* op : {"aten::stack", "detach", "AddmmBackward0", "gloo:all_reduce",
                         "autograd::engine::evaluate_function: AddmmBackward0"})
    EXPECT_EQ(names.count(op), 0u) << op;
  EXPECT_EQ(r.ranges.size(), 3u * 6);  // per step: the step, 5 ranges
  const ImportedRange& step = r.ranges.front();
  EXPECT_EQ(step.start_ns, 100'000);  // µs from the trace's start
  EXPECT_EQ(step.end_ns - step.start_ns, 5'900'000);
}

// The exporter writes names unescaped: a '"' in a record_function name makes invalid JSON,
// which is read by the exporter's layout instead, and said.
TEST(TorchLegacyImport, UnescapedQuotesAreReadByTheExportersLayout) {
  laggard::testing::TempDir tmp;
  const fs::path f = tmp.path / "t.json";
  spit(f, legacy_trace(three_steps(3000, "load \"shard\" C:\\data")));
  const ImportedRank r = import_torch_legacy(f.string(), {5});
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(range_names(r).count("load \"shard\" C:\\data"), 3u);
  EXPECT_EQ(r.ranges.size(), 3u * 6);  // per step: the step, 5 ranges
  bool said = false;
  for (const std::string& n : r.notes) said |= n.find("names unescaped (3 names") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(TorchLegacyImport, ClearErrors) {
  laggard::testing::TempDir tmp;
  spit(tmp.path / "norank.json", legacy_trace(three_steps(100)));
  spit(tmp.path / "numbers_rank0.json", "[1, 2, 3]");
  spit(tmp.path / "cut_rank0.json", legacy_trace(three_steps(100)).substr(0, 40));
  spit(tmp.path / "empty_rank0.json", "[]");
  auto message = [&](const char* f) {
    try {
      import_kineto((tmp.path / f).string());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(imported)");
  };
  EXPECT_NE(message("norank.json").find("holds no rank"), std::string::npos) << message("norank.json");
  EXPECT_NE(message("numbers_rank0.json").find("without named events"), std::string::npos);
  EXPECT_NE(message("empty_rank0.json").find("without named events"), std::string::npos);
  EXPECT_NE(message("cut_rank0.json").find("truncated or invalid JSON"), std::string::npos) << message("cut_rank0.json");
}

// Written as rank files and read back: ProfilerStep#N gives the steps, as for Kineto traces.
TEST(TorchLegacyImport, StepsAsForKinetoTraces) {
  laggard::testing::TempDir tmp;
  for (int rank = 0; rank < 3; ++rank) {
    const fs::path f = tmp.path / ("trace_rank" + std::to_string(rank) + ".json");
    spit(f, legacy_trace(three_steps(rank == 1 ? 9000 : 3000)));
    write_rank_file(import_kineto(f.string()), (tmp.path / "run").string(), "legacy");
  }
  const RunModel m = read_run((tmp.path / "run").string());
  ASSERT_EQ(m.ranks.size(), 3u);
  const StepSet steps = detect_steps(m, "");
  EXPECT_EQ(steps.count(), 3);
  EXPECT_EQ(steps.section, "ProfilerStep");
}

}  // namespace torch_legacy_import_test
}  // namespace laggard::report
