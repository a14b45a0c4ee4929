#include <gtest/gtest.h>

#include "config.h"

namespace laggard {
namespace config_test {

TEST(Config, DefaultsWhenNothingIsSet) {
  ConfigResult r = parse_config(map_env({}));
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_TRUE(r.config.enabled);
  EXPECT_EQ(r.config.out_dir, "laggard-out");
  EXPECT_EQ(r.config.sections, "");
  EXPECT_DOUBLE_EQ(r.config.flush_s, 10.0);
  EXPECT_EQ(r.config.log, LogLevel::warn);
}

TEST(Config, ReadsEveryVariable) {
  ConfigResult r = parse_config(map_env({{"LAGGARD_ENABLE", "1"},
                                         {"LAGGARD_OUT", "/tmp/x"},
                                         {"LAGGARD_SECTIONS", "^(fwd|bwd)$"},
                                         {"LAGGARD_FLUSH_S", "0.5"},
                                         {"LAGGARD_LOG", "debug"},
                                         {"LAGGARD_WINDOWS_PER_FILE", "7"},
                                         {"LAGGARD_MAX_OCCURRENCES", "100"}}));
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.config.out_dir, "/tmp/x");
  EXPECT_EQ(r.config.sections, "^(fwd|bwd)$");
  EXPECT_DOUBLE_EQ(r.config.flush_s, 0.5);
  EXPECT_EQ(r.config.log, LogLevel::debug);
  EXPECT_EQ(r.config.windows_per_file, 7);
  EXPECT_EQ(r.config.max_occurrences, 100);
}

// Issue 14: append-only frames are the default; JSON segments stay one variable away.
TEST(Config, FileFormatDefaultsToBinaryFramesAndJsonIsAsked) {
  EXPECT_TRUE(parse_config(map_env({})).config.binary_files);
  EXPECT_FALSE(parse_config(map_env({{"LAGGARD_FILE_FORMAT", "json"}})).config.binary_files);
  EXPECT_TRUE(parse_config(map_env({{"LAGGARD_FILE_FORMAT", "binary"}})).config.binary_files);
  ConfigResult bad = parse_config(map_env({{"LAGGARD_FILE_FORMAT", "xml"}}));
  EXPECT_TRUE(bad.config.binary_files);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("binary"), std::string::npos) << bad.warnings[0];
}

TEST(Config, DisableSpellings) {
  for (const char* v : {"0", "false", "OFF", "no"})
    EXPECT_FALSE(parse_config(map_env({{"LAGGARD_ENABLE", v}})).config.enabled) << v;
}

TEST(Config, BadValuesWarnOnceEachAndKeepDefaults) {
  ConfigResult r = parse_config(map_env({{"LAGGARD_ENABLE", "maybe"},
                                         {"LAGGARD_OUT", ""},
                                         {"LAGGARD_SECTIONS", "(unclosed"},
                                         {"LAGGARD_FLUSH_S", "ten"},
                                         {"LAGGARD_LOG", "loud"},
                                         {"LAGGARD_WINDOWS_PER_FILE", "0"},
                                         {"LAGGARD_MAX_OCCURRENCES", "-3"}}));
  EXPECT_EQ(r.warnings.size(), 7u);
  EXPECT_TRUE(r.config.enabled);
  EXPECT_EQ(r.config.out_dir, "laggard-out");
  EXPECT_EQ(r.config.sections, "");
  EXPECT_DOUBLE_EQ(r.config.flush_s, 10.0);
  EXPECT_EQ(r.config.log, LogLevel::warn);
  EXPECT_EQ(r.config.windows_per_file, 30);
  EXPECT_EQ(r.config.max_occurrences, 2048);
  for (const std::string& w : r.warnings) EXPECT_NE(w.find("using"), std::string::npos) << w;
}

TEST(Config, FlushIntervalBounds) {
  for (const char* v : {"0", "-1", "0.01", "1e9", "nan", "inf", "5s"})
    EXPECT_EQ(parse_config(map_env({{"LAGGARD_FLUSH_S", v}})).warnings.size(), 1u) << v;
  for (const char* v : {"0.05", "1", " 2.5", "86400"})
    EXPECT_TRUE(parse_config(map_env({{"LAGGARD_FLUSH_S", v}})).warnings.empty()) << v;
}

TEST(Config, ExitWaitBound) {
  EXPECT_DOUBLE_EQ(parse_config(map_env({})).config.exit_wait_s, 1.0);
  EXPECT_DOUBLE_EQ(parse_config(map_env({{"LAGGARD_EXIT_WAIT_S", "0.25"}})).config.exit_wait_s, 0.25);
  EXPECT_DOUBLE_EQ(parse_config(map_env({{"LAGGARD_EXIT_WAIT_S", "0"}})).config.exit_wait_s, 0.0);
  for (const char* v : {"-1", "61", "soon"}) {
    ConfigResult r = parse_config(map_env({{"LAGGARD_EXIT_WAIT_S", v}}));
    EXPECT_EQ(r.warnings.size(), 1u) << v;
    EXPECT_DOUBLE_EQ(r.config.exit_wait_s, 1.0) << v;
  }
}

TEST(Config, ClockChoice) {
  EXPECT_EQ(parse_config(map_env({})).config.clock, ClockChoice::automatic);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_CLOCK", "tsc"}})).config.clock, ClockChoice::tsc);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_CLOCK", "MONOTONIC"}})).config.clock, ClockChoice::monotonic);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_CLOCK", "auto"}})).config.clock, ClockChoice::automatic);
  ConfigResult r = parse_config(map_env({{"LAGGARD_CLOCK", "rdtsc"}}));
  EXPECT_EQ(r.config.clock, ClockChoice::automatic);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("auto, tsc or monotonic"), std::string::npos) << r.warnings[0];
}

TEST(Config, ParseIntIsStrict) {
  long long v = 0;
  EXPECT_TRUE(parse_int("42", 0, 100, &v));
  EXPECT_EQ(v, 42);
  EXPECT_FALSE(parse_int("42x", 0, 100, &v));
  EXPECT_FALSE(parse_int("", 0, 100, &v));
  EXPECT_FALSE(parse_int("101", 0, 100, &v));
  EXPECT_FALSE(parse_int("-1", 0, 100, &v));
  EXPECT_FALSE(parse_int("99999999999999999999", 0, 100, &v));
}

TEST(Config, GpuCaptureDefaults) {
  Config c = parse_config(map_env({})).config;
  EXPECT_TRUE(c.cupti);
  EXPECT_EQ(c.profiling_interval, 1);
  EXPECT_EQ(c.cupti_path, "");
}

TEST(Config, GpuCaptureVariables) {
  ConfigResult r = parse_config(map_env({{"LAGGARD_CUPTI", "0"},
                                         {"LAGGARD_PROFILING_INTERVAL", "5"},
                                         {"LAGGARD_CUPTI_PATH", "/opt/cuda/lib64"}}));
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_FALSE(r.config.cupti);
  EXPECT_EQ(r.config.profiling_interval, 5);
  EXPECT_EQ(r.config.cupti_path, "/opt/cuda/lib64");
  for (const char* v : {"1", "on", "TRUE", "yes", ""})
    EXPECT_TRUE(parse_config(map_env({{"LAGGARD_CUPTI", v}})).config.cupti) << v;
  for (const char* v : {"off", "false", "No"})
    EXPECT_FALSE(parse_config(map_env({{"LAGGARD_CUPTI", v}})).config.cupti) << v;
}

TEST(Config, BadGpuValuesWarnAndKeepDefaults) {
  ConfigResult r = parse_config(map_env({{"LAGGARD_CUPTI", "sometimes"}, {"LAGGARD_PROFILING_INTERVAL", "0"}}));
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[0].find("LAGGARD_CUPTI='sometimes'"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[1].find("LAGGARD_PROFILING_INTERVAL='0'"), std::string::npos) << r.warnings[1];
  EXPECT_TRUE(r.config.cupti);
  EXPECT_EQ(r.config.profiling_interval, 1);
  for (const char* v : {"-2", "x", "1.5", "2000000"})
    EXPECT_EQ(parse_config(map_env({{"LAGGARD_PROFILING_INTERVAL", v}})).config.profiling_interval, 1) << v;
}

}  // namespace
}  // namespace laggard

namespace laggard {
namespace config_test {

TEST(Config, NcclSwitch) {
  EXPECT_TRUE(parse_config(map_env({})).config.nccl);
  for (const char* v : {"0", "false", "Off", "no"})
    EXPECT_FALSE(parse_config(map_env({{"LAGGARD_NCCL", v}})).config.nccl) << v;
  for (const char* v : {"1", "true", "on", ""})
    EXPECT_TRUE(parse_config(map_env({{"LAGGARD_NCCL", v}})).config.nccl) << v;
  ConfigResult bad = parse_config(map_env({{"LAGGARD_NCCL", "sometimes"}}));
  EXPECT_TRUE(bad.config.nccl);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("LAGGARD_NCCL='sometimes'"), std::string::npos) << bad.warnings[0];
}

TEST(Config, NcclKernelEventsSwitch) {
  EXPECT_EQ(parse_config(map_env({})).config.nccl_kernel_events, -1);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_NCCL_KERNEL_EVENTS", "auto"}})).config.nccl_kernel_events, -1);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_NCCL_KERNEL_EVENTS", "0"}})).config.nccl_kernel_events, 0);
  EXPECT_EQ(parse_config(map_env({{"LAGGARD_NCCL_KERNEL_EVENTS", "on"}})).config.nccl_kernel_events, 1);
  ConfigResult bad = parse_config(map_env({{"LAGGARD_NCCL_KERNEL_EVENTS", "2"}}));
  EXPECT_EQ(bad.config.nccl_kernel_events, -1);
  ASSERT_EQ(bad.warnings.size(), 1u);
}

}  // namespace
}  // namespace laggard
