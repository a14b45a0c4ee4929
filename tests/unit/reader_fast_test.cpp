// The reader's fast path (report/read/reader_fast.h, issue 14) against the DOM code it stands in
// for: for valid windows it must accept and give the same model (strings interned in the same
// order), and for every malformed window the file must read exactly as it does with the DOM code
// alone (the same windows kept, the same notes and errors: issue 10's problem entries).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "json_fast_scan.h"
#include "json_tape.h"
#include "reader_fast.h"
#include "reader_frames.h"
#include "reader_gpu.h"
#include "reader_segment.h"

namespace reader_fast_test {

using nlohmann::json;
namespace rep = laggard::report;

constexpr int64_t kStart = 1'795'419'561'000'000'000;

json rich_window(int index) {
  const int64_t start = kStart + index * 10'000'000'000LL;
  json occ = {{"start_offset_ns", {1000, 2000}}, {"dur_ns", {500, 600}}, {"tid", {7, 8}}};
  json sections = json::array(
      {{{"name", "step"}, {"domain", nullptr}, {"parent", nullptr}, {"count", 4}, {"total_ns", 2200},
        {"min_ns", 500}, {"max_ns", 600}, {"median_ns", 550}, {"median_from_sample", true}, {"occurrences", occ}},
       {{"name", "fwd"}, {"domain", "app"}, {"parent", "step"}, {"count", 2}, {"total_ns", 20}, {"min_ns", 10},
        {"max_ns", 10}, {"median_ns", 10}},
       {{"name", "(other)"}, {"folded", true}, {"count", 9}, {"total_ns", 1}, {"min_ns", 1}, {"max_ns", 1},
        {"median_ns", 1}}});
  json kernel = {{"section", 0}, {"name", 1}, {"kind", "kernel"}, {"nccl", false}, {"graph", true},
                 {"grid", {64, 2, 1}}, {"block", {128, 1, 1}}, {"count", 3}, {"total_ns", 30}, {"min_ns", 9},
                 {"max_ns", 11}, {"median_ns", 10}};
  json memcpy = {{"section", nullptr}, {"name", 2}, {"kind", "memcpy"}, {"count", 1}, {"total_ns", 5},
                 {"min_ns", 5}, {"max_ns", 5}, {"median_ns", 5}};
  json records = json::object();
  for (const char* c : {"kind", "name", "section", "start_offset_ns", "dur_ns", "api_start_offset_ns", "api_dur_ns",
                        "tid", "correlation", "device", "stream", "shape", "bytes", "copy_kind", "flags", "shapes"})
    records[c] = json::array();
  json gpu = {{"sampled", false},
              {"clock_offset_ns", 0},
              {"launches", 12},
              {"strings", {"fwd", "gemm_kernel", "[memcpy HtoD]"}},
              {"kernels", {kernel, memcpy}},
              {"late", {{{"window", index > 0 ? index - 1 : 0}, {"kernels", {kernel}}}}},
              {"records", records}};
  json ops = {{"comm", {0, 0, 1}},
              {"p2p", {0, 0, 1}},
              {"func", {0, 0, 3}},
              {"seq", {0, 1, 0}},
              {"count", {16, 16, 4}},
              {"bytes", {64, 64, 16}},
              {"datatype", {1, 1, 9}},
              {"root", {-1, -1, -1}},
              {"peer", {-1, -1, 1}},
              {"algo", {2, 2, nullptr}},
              {"proto", {3, 3, 3}},
              {"nchannels", {2, 2, 1}},
              {"channels", {2, nullptr, 1}},
              {"host_start_offset_ns", {100, 5000, 7000}},
              {"host_dur_ns", {50, nullptr, 20}},
              {"chan_host_start_offset_ns", {150, nullptr, 7100}},
              {"chan_host_stop_offset_ns", {900, nullptr, 7500}},
              {"gpu_start_offset_ns", {200, nullptr, -100}},
              {"gpu_dur_ns", {300, nullptr, 40}}};
  json nccl = {{"gpu_clock", "globaltimer"},
               {"plugin", {{"table", 6}, {"inits", 1}, {"kernel_events", "on"}}},
               {"comms",
                {{{"id", "5eed0000c0de"}, {"name", nullptr}, {"nranks", 4}, {"rank", 1}, {"nnodes", 1}},
                 {{"id", "beef"}, {"name", "pp"}, {"nranks", 2}, {"rank", 0}}}},
               {"strings", {"AllReduce", "ncclFloat32", "RING", "SIMPLE"}},
               {"ops", ops},
               {"p2p", {{{"comm", 1}, {"sends", 3}, {"recvs", 2}, {"send_bytes", 30}, {"recv_bytes", 20}}}},
               {"dropped", {{"pool_full", 1}, {"no_gpu_time", 0}}}};
  return {{"index", index},
          {"start_ns", start},
          {"end_ns", start + 10'000'000'000LL},
          {"dropped", {{"ring_full", 0}, {"nccl_pool_full", 2}, {"occurrences_sampled", 2}}},
          {"sections", sections},
          {"gpu", gpu},
          {"nccl", nccl},
          {"paused", {{{"start_ns", start + 10}, {"end_ns", start + 20}, {"command", "pause"}, {"seq", 1}}}}};
}

json rank_file(int version) {
  json f = {{"schema", "laggard-rank"}, {"schema_version", version}, {"run_id", "r"},   {"rank", 3},
            {"world_size", 8},          {"host", "h3"},                 {"pid", 103},     {"segment", 0},
            {"process_start_ns", kStart}, {"data_end_ns", kStart + 30'000'000'000LL}, {"final", true},
            {"config", {{"flush_s", 10}}}, {"dropped", json::object()}};
  f["windows"] = {rich_window(0), rich_window(1), rich_window(2)};
  return f;
}

// Everything the reader puts into a Segment, strings by value and in table order.
std::string describe(const rep::Segment& s, const rep::StringTable& t) {
  std::ostringstream o;
  o << "rank " << s.rank << " world " << s.world_size << " folded " << s.folded_ranges << "\n";
  for (const auto& n : s.notes) o << "note " << n << "\n";
  for (size_t i = 0; i < t.size(); ++i) o << "string " << i << " " << t.at(static_cast<uint32_t>(i)) << "\n";
  for (const rep::CaptureWindow& w : s.windows) {
    o << "window " << w.index << " " << w.start_ns << " " << w.end_ns << " sampled " << w.gpu_sampled << " launches "
      << w.gpu_launches << " starved " << w.gpu_starved << " shared " << w.gpu_shared << " missed "
      << w.gpu_missed_launches << " table " << w.nccl_table << " events "
      << w.nccl_kernel_events << " health " << w.gpu_health.size() << " paused " << w.paused.size() << "\n";
    for (const auto& [k, v] : w.dropped) o << " dropped " << k << "=" << v << "\n";
    for (const rep::SectionWindow& sec : w.sections) {
      o << " section " << sec.name << "|" << sec.domain << "|" << sec.parent << " " << sec.count << " " << sec.total_ns
        << " " << sec.min_ns << " " << sec.max_ns << " " << sec.median_ns << " " << sec.median_from_sample << "\n";
      for (const rep::Occurrence& x : sec.occurrences)
        o << "  occ " << x.start_ns << " " << x.dur_ns << " " << x.tid << " " << x.weight << "\n";
    }
    auto stats = [&](const rep::KernelWindowStats& k) {
      o << t.at(k.section) << "|" << t.at(k.name) << " " << int(k.kind) << k.nccl << k.graph << " " << k.grid[0]
        << "," << k.grid[1] << "," << k.grid[2] << " " << k.block[0] << "," << k.block[1] << "," << k.block[2] << " "
        << k.count << " " << k.total_ns << " " << k.min_ns << " " << k.max_ns << " " << k.median_ns << "\n";
    };
    for (const auto& k : w.kernel_stats) o << " kernel ", stats(k);
    for (const rep::GpuActivity& a : w.gpu)
      o << " record " << int(a.kind) << " " << t.at(a.name) << "|" << t.at(a.section) << "|" << t.at(a.api_name) << " "
        << a.start_ns << " " << a.end_ns << " " << a.api_start_ns << " " << a.api_end_ns << " " << a.api_tid << " "
        << a.correlation << " " << a.device << " " << a.stream << " " << a.grid[0] << "," << a.grid[1] << ","
        << a.grid[2] << " " << a.block[0] << "," << a.block[1] << "," << a.block[2] << " " << a.bytes << " "
        << int(a.copy_kind) << " " << a.nccl << a.graph << "\n";
    const rep::SpanRange spans =  // the window's, or its range of the file's array
        w.gpu_spans.empty() && w.gpu_spans_count ? rep::SpanRange(s.gpu_spans, w.gpu_spans_first, w.gpu_spans_count)
                                                 : rep::SpanRange(w.gpu_spans);
    for (const rep::GpuSpan& a : spans)
      o << " span " << int(a.kind) << " " << t.at(a.name) << "|" << t.at(a.section) << " " << a.start_ns << " "
        << a.end_ns << " " << a.api_start_ns << " " << a.api_end_ns << " " << a.device << " "
        << a.stream << " " << a.nccl << "\n";
    for (const auto& l : w.gpu_late) o << " late " << l.window << " ", stats(l.stats);
    for (const rep::Collective& c : w.collectives)
      o << " op " << t.at(c.comm) << "|" << t.at(c.comm_name) << " " << c.comm_nranks << " " << c.comm_rank << " "
        << c.comm_nnodes << " " << t.at(c.func) << " " << c.p2p << " " << c.peer << " " << c.seq << " " << c.count
        << " " << c.bytes << " " << t.at(c.datatype) << " " << c.root << " " << t.at(c.algo) << " " << t.at(c.proto)
        << " " << c.nchannels << " " << c.channels << " " << c.upload_start_ns << " " << c.upload_end_ns << " "
        << c.gpu_start_ns << " " << c.gpu_end_ns << " " << c.chan_host_start_ns << " " << c.chan_host_stop_ns << "\n";
    for (const auto& p : w.p2p)
      o << " p2p " << t.at(p.comm) << " " << p.comm_nranks << " " << p.comm_rank << " " << p.sends << " " << p.recvs
        << " " << p.send_bytes << " " << p.recv_bytes << "\n";
  }
  return o.str();
}

// How the file reads: its segment described, or the error that made it unreadable; `spans`: as
// `laggard report` reads per-kernel records (ReadOptions::compact_gpu).
std::string read_as(const std::string& text, bool fast, bool spans = false) {
  rep::use_fast_reader(fast);
  rep::DecodeGpuAsSpans as_spans(spans);
  rep::StringTable strings;
  std::string out;
  try {
    rep::Segment s = rep::parse_segment_text(text, "rank3.json", strings);
    if (spans) {  // as the reader does after each file
      rep::compact_gpu_records(s.windows);
      rep::consolidate_gpu_spans(s);
    }
    out = describe(s, strings);
  } catch (const std::exception& e) {
    out = std::string("error: ") + e.what();
  }
  rep::use_fast_reader(true);
  return out;
}

void expect_same_reading(const std::string& text, const std::string& what) {
  EXPECT_EQ(read_as(text, true), read_as(text, false)) << what;
}

// Issue 29: per-kernel records in JSON (LAGGARD_FILE_FORMAT=json, older files) are read straight
// from the tape: kernels with launch shapes and known and unknown launches, a memcpy, an imported
// trace's launching-call names ("api", version 4).
json with_records(json f, bool api) {
  for (json& w : f["windows"]) {
    json& r = w["gpu"]["records"];
    r["kind"] = {0, 0, 1, 0};
    r["name"] = {1, 1, 2, nullptr};
    r["section"] = {0, -1, 0, 0};
    r["start_offset_ns"] = {100, 250, -40, 9000};
    r["dur_ns"] = {50, 60, 7, 0};
    r["api_start_offset_ns"] = {90, 0, -60, 8000};
    r["api_dur_ns"] = {5, -1, 3, 0};
    r["tid"] = {7, 7, 8, 4294967295u};
    r["correlation"] = {11, 12, 13, 0};
    r["device"] = {0, 1, -1, 32767};  // the last: kMaxGpuDevice
    r["stream"] = {7, 7, 13, 0};
    r["shape"] = {0, 1, -1, 0};
    r["bytes"] = {0, 0, 4096, 0};
    r["copy_kind"] = {0, 0, 1, 0};
    r["flags"] = {0, 2, 0, 1};
    r["shapes"] = {{64, 2, 1, 128, 1, 1}, {1, 1, 1, 32, 1, 1, 99}};
    if (api) r["api"] = {1, -1, 2, nullptr};
  }
  return f;
}

void expect_same_records(const std::string& text, const std::string& what) {
  EXPECT_EQ(read_as(text, true), read_as(text, false)) << what;
  EXPECT_EQ(read_as(text, true, true), read_as(text, false, true)) << what << " (as spans)";
}

TEST(ReaderFast, AcceptsAWindowOfEveryPartItReads) {
  for (int version : {3, 4, 5}) {
    json f = rank_file(version);
    rep::JsonTape tape;
    const std::string window = f["windows"][1].dump();  // the tape reads its strings there
    ASSERT_TRUE(tape.parse(window));
    rep::StringTable strings;
    rep::CaptureWindow cw;
    uint64_t folded = 0;
    ASSERT_TRUE(rep::read_window_fast(tape, 0, version, strings, folded, cw)) << version;
    EXPECT_EQ(folded, 9u);
    EXPECT_EQ(cw.sections.size(), 2u);
    EXPECT_EQ(cw.collectives.size(), 3u);
    EXPECT_EQ(cw.paused.size(), 1u);
  }
}

TEST(ReaderFast, ValidFilesReadAsTheDomCodeReadsThem) {
  for (int version : {1, 2, 3, 4, 5}) {
    std::string text = rank_file(version).dump();
    std::string fast = read_as(text, true);
    EXPECT_EQ(fast, read_as(text, false)) << version;
    EXPECT_EQ(fast.find("error"), std::string::npos) << fast;
  }
}

TEST(ReaderFast, ARepeatedKeyReadsAsTheDomCodeReadsIt) {
  std::string text = rank_file(5).dump();
  for (const char* from : {"\"count\":4,", "\"index\":1,", "\"no_gpu_time\":0,", "\"nccl_pool_full\":2,", "\"launches\":12,",
                           "\"ring_full\":0}"}) {
    std::string t = text;
    size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::string dup = from;
    t.insert(at, dup.substr(0, dup.find(':')) + ":77,");  // the DOM keeps the last
    expect_same_reading(t, from);
  }
}

// Each malformed value: the same windows kept, the same notes, the same error.
TEST(ReaderFast, MalformedWindowsGiveTheSameProblemsAsTheDomCode) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
  };
  const std::vector<Case> cases = {
      {"float count", [](json& w) { w["sections"][0]["count"] = 4.0; }},
      {"fractional count", [](json& w) { w["sections"][0]["count"] = 4.5; }},
      {"negative duration", [](json& w) { w["sections"][1]["total_ns"] = -1; }},
      {"huge duration", [](json& w) { w["sections"][1]["max_ns"] = uint64_t{1} << 62; }},
      {"string count", [](json& w) { w["sections"][1]["count"] = "2"; }},
      {"no name", [](json& w) { w["sections"][1].erase("name"); }},
      {"null name", [](json& w) { w["sections"][1]["name"] = nullptr; }},
      {"sections an object", [](json& w) { w["sections"] = json::object(); }},
      {"sections missing", [](json& w) { w.erase("sections"); }},
      {"end before start", [](json& w) { w["end_ns"] = w["start_ns"].get<int64_t>() - 1; }},
      {"index negative", [](json& w) { w["index"] = -1; }},
      {"window not an object", [](json& w) { w = json::array(); }},
      {"occurrences differ", [](json& w) { w["sections"][0]["occurrences"]["tid"] = {7}; }},
      {"more occurrences than count", [](json& w) { w["sections"][0]["count"] = 1; }},
      {"occurrence before 1970", [](json& w) { w["sections"][0]["occurrences"]["start_offset_ns"][0] = -(int64_t{1} << 52); }},
      {"tid too large", [](json& w) { w["sections"][0]["occurrences"]["tid"][1] = uint64_t{1} << 40; }},
      {"folded not bool", [](json& w) { w["sections"][2]["folded"] = 1; }},
      {"dropped bad value", [](json& w) { w["dropped"]["ring_full"] = -3; }},
      {"dropped null", [](json& w) { w["dropped"] = nullptr; }},
      {"gpu string index out of range", [](json& w) { w["gpu"]["kernels"][0]["name"] = 9; }},
      {"gpu string not a string", [](json& w) { w["gpu"]["strings"][1] = 5; }},
      {"gpu kind null", [](json& w) { w["gpu"]["kernels"][1]["kind"] = nullptr; }},
      {"gpu grid string", [](json& w) { w["gpu"]["kernels"][0]["grid"] = "64"; }},
      {"gpu grid negative", [](json& w) { w["gpu"]["kernels"][0]["grid"][1] = -2; }},
      {"gpu sampled null", [](json& w) { w["gpu"]["sampled"] = nullptr; }},
      {"gpu launches float", [](json& w) { w["gpu"]["launches"] = 12.7; }},
      {"gpu late not an array", [](json& w) { w["gpu"]["late"] = json::object(); }},
      {"gpu records missing a column", [](json& w) { w["gpu"]["records"].erase("tid"); }},
      {"gpu records not empty", [](json& w) {
         for (auto& [k, v] : w["gpu"]["records"].items()) v = k == "shapes" ? json::array() : json::array({0});
       }},
      {"gpu not an object", [](json& w) { w["gpu"] = 3; }},
      {"nccl comm index out of range", [](json& w) { w["nccl"]["ops"]["comm"][2] = 5; }},
      {"nccl column short", [](json& w) { w["nccl"]["ops"]["seq"] = {0, 1}; }},
      {"nccl optional column short", [](json& w) { w["nccl"]["ops"]["channels"] = {1}; }},
      {"nccl no comm column", [](json& w) { w["nccl"]["ops"].erase("comm"); }},
      {"nccl func not a number", [](json& w) { w["nccl"]["ops"]["func"][0] = "AllReduce"; }},
      {"nccl func out of range", [](json& w) { w["nccl"]["ops"]["func"][0] = 99; }},
      {"nccl p2p 2", [](json& w) { w["nccl"]["ops"]["p2p"][0] = 2; }},
      {"nccl rank outside comm", [](json& w) { w["nccl"]["comms"][0]["rank"] = 4; }},
      {"nccl comm id missing", [](json& w) { w["nccl"]["comms"][1].erase("id"); }},
      {"nccl comm name a number", [](json& w) { w["nccl"]["comms"][1]["name"] = 3; }},
      {"nccl host start before 1970", [](json& w) { w["nccl"]["ops"]["host_start_offset_ns"][0] = -(int64_t{1} << 52); }},
      {"nccl gpu start far", [](json& w) { w["nccl"]["ops"]["gpu_start_offset_ns"][0] = int64_t{1} << 61; }},
      {"nccl dropped bad", [](json& w) { w["nccl"]["dropped"]["pool_full"] = -1; }},
      {"nccl p2p comm out of range", [](json& w) { w["nccl"]["p2p"][0]["comm"] = 7; }},
      {"nccl plugin table string", [](json& w) { w["nccl"]["plugin"]["table"] = "6"; }},
      {"nccl stream events", [](json& w) { w["gpu"]["stream_events"] = json::object(); }},
      {"paused bad", [](json& w) { w["paused"][0]["end_ns"] = 0; }},
      {"gpu health", [](json& w) { w["gpu_health"] = {{"devices", json::array()}}; }},
  };
  for (const Case& c : cases) {
    json f = rank_file(5);
    c.edit(f["windows"][1]);
    expect_same_reading(f.dump(), c.what);
  }
}

TEST(ReaderFast, PerKernelRecordsReadAsTheDomCodeReadsThem) {
  for (int version : {2, 3, 4, 5})
    for (bool api : {false, true}) {
      std::string text = with_records(rank_file(version), api).dump();
      const std::string fast = read_as(text, true);
      EXPECT_EQ(fast, read_as(text, false)) << version << api;
      EXPECT_EQ(read_as(text, true, true), read_as(text, false, true)) << version << api;
      EXPECT_NE(fast.find(" record 0 gemm_kernel|fwd|"), std::string::npos) << fast;
    }
  // The fast path takes them: it reads the window without declining.
  json f = with_records(rank_file(5), true);
  rep::JsonTape tape;
  const std::string window = f["windows"][1].dump();  // the tape reads its strings there
  ASSERT_TRUE(tape.parse(window));
  rep::StringTable strings;
  rep::CaptureWindow cw;
  uint64_t folded = 0;
  ASSERT_TRUE(rep::read_window_fast(tape, 0, 5, strings, folded, cw));
  ASSERT_EQ(cw.gpu.size(), 4u);
  EXPECT_EQ(cw.gpu[0].grid[0], 64u);
  EXPECT_EQ(cw.gpu[1].block[0], 32u);
  EXPECT_EQ(strings.at(cw.gpu[0].api_name), "gemm_kernel");
}

// Each malformed record: the same windows kept, the same notes, the same error, whether the
// records are read in full or as spans.
TEST(ReaderFast, MalformedRecordsGiveTheSameProblemsAsTheDomCode) {
  const std::vector<std::pair<const char*, std::function<void(json&)>>> cases = {
      {"kind 256", [](json& r) { r["kind"][1] = 256; }},
      {"kind float", [](json& r) { r["kind"][1] = 1.0; }},
      {"name out of range", [](json& r) { r["name"][0] = 3; }},
      {"name -2", [](json& r) { r["name"][0] = -2; }},
      {"section a string", [](json& r) { r["section"][0] = "fwd"; }},
      {"start before 1970", [](json& r) { r["start_offset_ns"][0] = -(int64_t{1} << 52); }},
      {"start far", [](json& r) { r["start_offset_ns"][0] = int64_t{1} << 60; }},
      {"negative duration", [](json& r) { r["dur_ns"][2] = -1; }},
      {"api duration -2", [](json& r) { r["api_dur_ns"][0] = -2; }},
      {"api start far, launch unknown", [](json& r) { r["api_start_offset_ns"][1] = int64_t{1} << 60; }},
      {"api start far, launch known", [](json& r) { r["api_start_offset_ns"][0] = int64_t{1} << 60; }},
      {"tid 2^32", [](json& r) { r["tid"][0] = uint64_t{1} << 32; }},
      {"correlation negative", [](json& r) { r["correlation"][0] = -1; }},
      {"device -2", [](json& r) { r["device"][0] = -2; }},
      {"stream null", [](json& r) { r["stream"][0] = nullptr; }},
      {"shape out of range", [](json& r) { r["shape"][0] = 2; }},
      {"shape short", [](json& r) { r["shapes"][0] = {64, 2, 1}; }},
      {"shape negative dim", [](json& r) { r["shapes"][1][4] = -1; }},
      {"shape not an array", [](json& r) { r["shapes"][0] = 3; }},
      {"shapes an object", [](json& r) { r["shapes"] = json::object(); }},
      {"shapes missing", [](json& r) { r.erase("shapes"); }},
      {"unused shape bad", [](json& r) { r["shapes"].push_back({"x"}); }},
      {"bytes negative", [](json& r) { r["bytes"][2] = -4096; }},
      {"copy kind 300", [](json& r) { r["copy_kind"][2] = 300; }},
      {"flags negative", [](json& r) { r["flags"][0] = -1; }},
      {"column short", [](json& r) { r["dur_ns"].erase(0); }},
      {"column nested", [](json& r) { r["dur_ns"][0] = {50}; }},
      {"column missing", [](json& r) { r.erase("bytes"); }},
      {"kind an object", [](json& r) { r["kind"] = json::object(); }},
      {"api short", [](json& r) { r["api"] = {1}; }},
      {"api out of range", [](json& r) { r["api"][0] = 9; }},
      {"records an array", [](json& r) { r = json::array(); }},
  };
  for (const auto& [what, edit] : cases) {
    json f = with_records(rank_file(4), true);
    edit(f["windows"][1]["gpu"]["records"]);
    expect_same_records(f.dump(), what);
  }
}

TEST(ReaderFast, InvalidJsonGivesTheSameError) {
  std::string text = rank_file(5).dump();
  expect_same_reading(text.substr(0, text.size() / 2), "cut in half");
  expect_same_reading(text + " x", "trailing text");
  std::string bad_utf8 = text;
  bad_utf8.replace(bad_utf8.find("gemm_kernel"), 4, "\xff\xfe\xfd\xfc");
  expect_same_reading(bad_utf8, "invalid UTF-8");
  json no_windows = rank_file(5);
  no_windows.erase("windows");
  expect_same_reading(no_windows.dump(), "no windows");
  json old = rank_file(5);
  old["schema_version"] = 9;
  expect_same_reading(old.dump(), "unknown version");
}

TEST(JsonTape, ToJsonRebuildsTheDom) {
  const std::string text = R"({"a":[1,-2,3.5,"x\u00e9",true,null,{}],"b":{"c":18446744073709551615},"a":0})";
  rep::JsonTape tape;
  ASSERT_TRUE(tape.parse(text));
  EXPECT_EQ(tape.to_json(0), json::parse(text));
  EXPECT_EQ(tape.to_json(0).dump(), json::parse(text).dump());
  EXPECT_EQ(tape.only_member(0, "a"), 0u);  // repeated
  EXPECT_NE(tape.only_member(0, "b"), 0u);
  EXPECT_FALSE(tape.parse("{\"a\":}"));
  EXPECT_FALSE(tape.parse(""));
}

// The fast scanner's strings stay in the text they were read from (no copy per key and value);
// nlohmann's, which decodes escapes, are the decoded copies.
TEST(JsonTape, StringsPointIntoTheTextUnlessTheyWereDecoded) {
  const std::string plain = R"({"name":"sm90_gemm","list":["a","bc"]})";
  rep::JsonTape tape;
  ASSERT_TRUE(tape.parse(plain));
  const rep::JsonTape::Value& name = tape.at(1);
  EXPECT_EQ(tape.key(name), "name");
  EXPECT_EQ(tape.str(name), "sm90_gemm");
  EXPECT_GE(tape.str(name).data(), plain.data());
  EXPECT_LE(tape.str(name).data() + tape.str(name).size(), plain.data() + plain.size());
  EXPECT_EQ(tape.key(tape.at(2)).data(), plain.data() + plain.find("list"));
  EXPECT_EQ(tape.str(tape.at(4)), "bc");

  const std::string escaped = R"({"na\u006de":"a\nb","k":"\u00e9"})";
  ASSERT_TRUE(tape.parse(escaped));
  EXPECT_EQ(tape.key(tape.at(1)), "name");
  EXPECT_EQ(tape.str(tape.at(1)), "a\nb");
  EXPECT_EQ(tape.str(tape.at(2)), "\xc3\xa9");
  EXPECT_EQ(tape.to_json(0), json::parse(escaped));

  ASSERT_TRUE(tape.parse(plain));  // the next text read fast again, from its own bytes
  EXPECT_EQ(tape.str(tape.at(1)).data(), plain.data() + plain.find("sm90_gemm"));
}

// Names interned into one table keep their ids however many there are (the table grows), and
// transform keeps every id.
TEST(StringTable, KeepsEveryIdAsItGrows) {
  rep::StringTable t;
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i)
    names.push_back(i % 7 == 0 ? std::to_string(i) : "sm90_xmma_gemm_kernel_" + std::to_string(i * 7919));
  names.push_back("");
  for (size_t i = 0; i < names.size(); ++i) ASSERT_EQ(t.intern(names[i]), i);
  EXPECT_EQ(t.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(t.intern(names[i]), i) << names[i];
    ASSERT_EQ(t.at(static_cast<uint32_t>(i)), names[i]);
  }
  EXPECT_EQ(t.at(rep::StringTable::kNone), "");
  t.transform([](const std::string& s) { return "<" + s + ">"; });
  EXPECT_EQ(t.intern("<" + names[42] + ">"), 42u);
  EXPECT_EQ(t.intern("<>"), names.size() - 1);
  EXPECT_EQ(t.intern(names[42]), names.size());  // the old spelling is a new string now
  rep::StringTable copy = t;
  EXPECT_EQ(copy.intern("<" + names[4999] + ">"), 4999u);
}

// The tape's own scanner takes the common texts and leaves the rest to nlohmann: either way a
// text is accepted exactly when json::parse accepts it, and reads as the same values of the
// same kinds (unsigned, signed, float) -- on hand-picked edge cases and on random mutations.
bool same_kinds(const json& a, const json& b) {
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_number_float()) return std::memcmp(&a.get_ref<const double&>(), &b.get_ref<const double&>(), sizeof(double)) == 0;
  if (!a.is_structured()) return a == b;
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_kinds(a[i], b[i])) return false;
    return true;
  }
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || !same_kinds(it.value(), b[it.key()])) return false;
  return true;
}

void expect_tape_reads_as_nlohmann(const std::string& text) {
  rep::JsonTape tape;
  const bool accepted = json::accept(text);
  ASSERT_EQ(tape.parse(text), accepted) << text;
  if (accepted) {
    EXPECT_TRUE(same_kinds(tape.to_json(0), json::parse(text))) << text;
  }
}

TEST(JsonTape, ReadsEveryTextAsJsonParseDoes) {
  const char* cases[] = {
      "0", "-0", "1", "-1", "007", "1.", ".5", "-", "+1", "1e5", "1E+5", "1e-5", "-1.5e-3", "0.1", "2.5E10",
      "123456789012345678", "1234567890123456789", "-123456789012345678", "-9223372036854775808", "-9223372036854775809", "9223372036854775808", "1799999999000000000",
      "99999999999999999999", "123456789012345678901234567890",
      "18446744073709551615", "18446744073709551616", "1e400", "-1e400", "1e-400", "4.9e-324", "2.2250738585072014e-308",
      "0.30000000000000004", "9007199254740993", "9007199254740993.0", "true", "false", "null", "tru", "nul",
      "\"\"", "\"a\"", "\"a\\nb\"", "\"\\u00e9\"", "\"\xc3\xa9\"", "\"\xff\"", "\"tab\there\"", "\"\x7f\"",
      "[]", "{}", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\"1}", "{a:1}", "{\"a\":1}", " \t\r\n{ \"a\" : [ 1 , 2 ] } \n",
      "{\"a\":1}{}", "[1 2]", "\xef\xbb\xbf{}", "{\"a\":{\"b\":{\"c\":[[],[{}]]}},\"a\":2}", "[1,2", "{\"a\":",
      "[-]", "[1e]", "[1e+]", "[0x10]", "[Infinity]", "[NaN]", "\"unterminated",
  };
  for (const char* text : cases) expect_tape_reads_as_nlohmann(text);
  std::string deep(600, '[');
  deep += std::string(600, ']');
  expect_tape_reads_as_nlohmann(deep);
}

// Digits are read eight at a time where the text has eight bytes left: every length of number
// (1 to 21 digits, past what fits in 64 bits), signed or not, with a fraction or not, followed by
// every kind of byte, at every distance from the text's end, reads as json::parse reads it.
TEST(JsonTape, NumbersOfEveryLengthReadAsJsonParseDoes) {
  std::mt19937_64 rng(20261129);
  const char* after[] = {"]", ",7]", " ]", ".5]", "e3]", "x]", ":]", "/]", "\x7f]", "\xff]", "\xfa]"};
  for (int digits = 1; digits <= 21; ++digits)
    for (int round = 0; round < 40; ++round) {
      std::string n(1, char('1' + rng() % 9));
      for (int d = 1; d < digits; ++d) n += char('0' + rng() % 10);
      if (round % 5 == 0) n.replace(1, std::string::npos, std::string(size_t(digits - 1), round % 2 ? '9' : '0'));
      const std::string sign = round % 3 == 0 ? "-" : "";
      for (const char* tail : after)
        for (int pad = 0; pad < 9; ++pad)
          expect_tape_reads_as_nlohmann("[" + sign + n + tail + std::string(size_t(pad), ' '));
    }
  expect_tape_reads_as_nlohmann("[18446744073709551615]");
  expect_tape_reads_as_nlohmann("[18446744073709551616]");
  expect_tape_reads_as_nlohmann("[00000000]");
  expect_tape_reads_as_nlohmann("[012345678]");
}

// The scanner itself (not nlohmann behind it) takes every integer that fits in 64 bits, each
// length of run at each distance from the end, with the value the digits spell.
struct NumbersSeen {
  std::vector<uint64_t> magnitudes;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(int64_t i, std::string_view) { return magnitudes.push_back(uint64_t(-(i + 1)) + 1), true; }
  bool number_unsigned(uint64_t u, std::string_view) { return magnitudes.push_back(u), true; }
  bool number_float(double, std::string_view) { return true; }
  bool text_value(std::string_view) { return true; }
  bool key_text(std::string_view) { return true; }
  bool start_object(size_t) { return true; }
  bool end_object() { return true; }
  bool start_array(size_t) { return true; }
  bool end_array() { return true; }
};

TEST(JsonFastScan, ReadsEveryIntegerThatFitsItself) {
  std::mt19937_64 rng(29);
  for (int digits = 1; digits <= 20; ++digits)
    for (int round = 0; round < 200; ++round) {
      std::string n(1, char('1' + rng() % 9));
      for (int d = 1; d < digits; ++d) n += char('0' + rng() % 10);
      if (digits == 20 && n > "18446744073709551615") continue;
      const bool negative = round % 2 && digits < 19;
      const std::string text = "[" + std::string(negative ? "-" : "") + n + std::string(size_t(round % 10), ' ') + "]";
      NumbersSeen seen;
      ASSERT_TRUE(rep::JsonFastScan<NumbersSeen>(text, seen).run()) << text;
      ASSERT_EQ(seen.magnitudes, std::vector<uint64_t>{std::stoull(n)}) << text;
    }
}

TEST(JsonTape, RandomMutationsReadAsJsonParseDoes) {
  const std::string seed =
      R"({"index":3,"start_ns":1795447174860587919,"sections":[{"name":"fwd","count":2,"median_ns":-12,)"
      R"("x":1.25e-3,"ok":true,"none":null,"list":[0,18,-7,3.0]}],"s":"text"})";
  std::mt19937 rng(20261124);
  const std::string alphabet = "{}[],:\"\\-+.eE0123456789 tfnul\x01\x80\xc3";
  for (int i = 0; i < 5000; ++i) {
    std::string text = seed;
    for (int m = 1 + int(rng() % 3); m > 0; --m) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(text.begin() + at, c); break;
        default: text.erase(at, 1);
      }
    }
    expect_tape_reads_as_nlohmann(text);
  }
}

}  // namespace
