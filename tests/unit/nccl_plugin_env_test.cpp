// How the library constructor sets NCCL_PROFILER_PLUGIN (nccl_hooks/plugin_env.*).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "plugin_env.h"

namespace laggard::nccl {
namespace {

TEST(NcclPluginEnv, UnsetGetsTheSoname) {
  for (const char* current : {static_cast<const char*>(nullptr), ""}) {
    PluginEnvDecision d = decide_plugin_env(current, true, "/opt/laggard/lib/liblaggard.so");
    ASSERT_TRUE(d.set_to.has_value());
    EXPECT_EQ(*d.set_to, "liblaggard.so");
    EXPECT_EQ(d.status, "on");
    EXPECT_TRUE(d.warning.empty());
  }
}

TEST(NcclPluginEnv, OursAlreadyIsLeftAsIsWithoutWarning) {
  // Inherited from a parent laggard process, or chosen by the user.
  char tmpl[] = "/tmp/laggard-env-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string self = dir + "/liblaggard.so";
  std::ofstream(self) << "x";
  std::filesystem::create_symlink(self, dir + "/link.so");
  for (const char* current : {"liblaggard.so", "STATIC_PLUGIN", "static_plugin", "STATIC", "s"}) {
    PluginEnvDecision d = decide_plugin_env(current, true, self);
    EXPECT_FALSE(d.set_to) << current;
    EXPECT_EQ(d.status, "on") << current;
    EXPECT_TRUE(d.warning.empty()) << current;
  }
  for (std::string current : {self, dir + "/link.so"}) {
    PluginEnvDecision d = decide_plugin_env(current.c_str(), true, self);
    EXPECT_EQ(d.status, "on") << current;
    EXPECT_TRUE(d.warning.empty()) << current;
  }
  std::filesystem::remove_all(dir);
}

TEST(NcclPluginEnv, AnotherPluginIsLeftAloneWithAWarning) {
  for (const char* current : {"/opt/nccl/libnccl-profiler-inspector.so", "inspector", "none", "STATIC_PLUGINX",
                              "/elsewhere/liblaggard.so"}) {
    PluginEnvDecision d = decide_plugin_env(current, true, "/opt/laggard/lib/liblaggard.so");
    EXPECT_FALSE(d.set_to) << current;
    EXPECT_EQ(d.status.rfind("off: ", 0), 0u) << current;
    EXPECT_NE(d.warning.find(current), std::string::npos) << d.warning;
    EXPECT_NE(d.warning.find("NCCL Inspector"), std::string::npos);
  }
}

TEST(NcclPluginEnv, SwitchedOffSetsNothing) {
  PluginEnvDecision d = decide_plugin_env(nullptr, false, "/x/liblaggard.so");
  EXPECT_FALSE(d.set_to);
  EXPECT_EQ(d.status, "off: LAGGARD_NCCL=0");
  EXPECT_TRUE(d.warning.empty());
  d = decide_plugin_env("/opt/inspector.so", false, "/x/liblaggard.so");
  EXPECT_TRUE(d.warning.empty());  // laggard was told to stay out of NCCL: nothing to warn about
}

TEST(NcclPluginEnv, OfferAtLoadSetsTheVariableAndRemembersTheChoice) {
  unsetenv("NCCL_PROFILER_PLUGIN");
  Config cfg;
  EXPECT_EQ(offer_plugin_at_load(cfg, "/x/liblaggard.so", false), "on");
  EXPECT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), "liblaggard.so");
  EXPECT_TRUE(plugin_allowed());
  cfg.nccl = false;
  unsetenv("NCCL_PROFILER_PLUGIN");
  EXPECT_EQ(offer_plugin_at_load(cfg, "/x/liblaggard.so", false), "off: LAGGARD_NCCL=0");
  EXPECT_EQ(std::getenv("NCCL_PROFILER_PLUGIN"), nullptr);
  EXPECT_FALSE(plugin_allowed());
}

}  // namespace
}  // namespace laggard::nccl
