// How the library constructor sets NCCL_PROFILER_PLUGIN (nccl_hooks/plugin_env.*).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "plugin_env.h"

namespace laggard::nccl {
namespace nccl_plugin_env_test {

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
  setenv("LD_PRELOAD", "liblaggard.so", 1);
  setenv("NCCL_CONF_FILE", "/nonexistent/nccl.conf", 1);
  Config cfg;
  EXPECT_EQ(offer_plugin_at_load(cfg, "/x/liblaggard.so", false), "on");
  EXPECT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), "liblaggard.so");
  EXPECT_TRUE(plugin_allowed());
  cfg.nccl = false;
  unsetenv("NCCL_PROFILER_PLUGIN");
  EXPECT_EQ(offer_plugin_at_load(cfg, "/x/liblaggard.so", false), "off: LAGGARD_NCCL=0");
  EXPECT_EQ(std::getenv("NCCL_PROFILER_PLUGIN"), nullptr);
  EXPECT_FALSE(plugin_allowed());
  unsetenv("LD_PRELOAD");
  unsetenv("NCCL_CONF_FILE");
}

// NCCL's own configuration files (src/misc/param.cc initEnvFunc/setEnvFile, v2.27.3-v2.30.7).
class NcclConf : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/laggard-conf-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(NcclConf, FilesInNcclsOrder) {
  EXPECT_EQ(nccl_conf_files("/x/my.conf", "/home/u"), (std::vector<std::string>{"/x/my.conf", "/etc/nccl.conf"}));
  EXPECT_EQ(nccl_conf_files("", "/home/u"), (std::vector<std::string>{"/home/u/.nccl.conf", "/etc/nccl.conf"}));
  EXPECT_EQ(nccl_conf_files(nullptr, nullptr), (std::vector<std::string>{"/etc/nccl.conf"}));
}

TEST_F(NcclConf, FirstDefinitionWinsAcrossAndWithinFiles) {
  std::string user = write("user.conf",
                           "# NCCL_PROFILER_PLUGIN=commented\n"
                           "NCCL_DEBUG=INFO\n"
                           "no equals sign\n"
                           "NCCL_PROFILER_PLUGIN =spaced key is another key\n"
                           "NCCL_PROFILER_PLUGIN=/opt/inspector/libnccl-profiler-inspector.so\r\n"
                           "NCCL_PROFILER_PLUGIN=second\n");
  std::string sys = write("etc.conf", "NCCL_PROFILER_PLUGIN=from-etc\nNCCL_SOCKET_IFNAME=eth0\n");
  auto v = nccl_conf_lookup({user, sys}, "NCCL_PROFILER_PLUGIN");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value, "/opt/inspector/libnccl-profiler-inspector.so");
  EXPECT_EQ(v->file, user);
  v = nccl_conf_lookup({dir_ + "/missing.conf", sys}, "NCCL_PROFILER_PLUGIN");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value, "from-etc");
  EXPECT_FALSE(nccl_conf_lookup({sys}, "NCCL_NET"));
}

TEST_F(NcclConf, APluginSetInAConfFileIsHonoured) {
  PluginEnvInput in;
  in.self_path = "/opt/laggard/lib/liblaggard.so";
  in.conf = ConfValue{"inspector", "/etc/nccl.conf"};
  PluginEnvDecision d = decide_plugin_env(in);
  EXPECT_FALSE(d.set_to);  // setting the variable would override the file
  EXPECT_EQ(d.status, "off: NCCL_PROFILER_PLUGIN is set in /etc/nccl.conf to 'inspector'");
  EXPECT_NE(d.warning.find("/etc/nccl.conf"), std::string::npos) << d.warning;
  in.conf = ConfValue{"liblaggard.so", "/home/u/.nccl.conf"};
  d = decide_plugin_env(in);
  EXPECT_FALSE(d.set_to);
  EXPECT_EQ(d.status, "on");
  // The environment wins over the files, as in NCCL (setenv without overwrite).
  in.current = "liblaggard.so";
  in.conf = ConfValue{"inspector", "/etc/nccl.conf"};
  EXPECT_EQ(decide_plugin_env(in).status, "on");
}

TEST_F(NcclConf, OfferAtLoadReadsNcclConfFile) {
  std::string conf = write("nccl.conf", "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler-x.so\n");
  setenv("NCCL_CONF_FILE", conf.c_str(), 1);
  unsetenv("NCCL_PROFILER_PLUGIN");
  std::string self = write("liblaggard.so", "x");
  setenv("LD_PRELOAD", self.c_str(), 1);
  Config cfg;
  EXPECT_EQ(offer_plugin_at_load(cfg, self, false), "off: NCCL_PROFILER_PLUGIN is set in " + conf +
                                                       " to '/opt/other/libnccl-profiler-x.so'");
  EXPECT_EQ(std::getenv("NCCL_PROFILER_PLUGIN"), nullptr);
  EXPECT_FALSE(plugin_allowed());
  unsetenv("NCCL_CONF_FILE");
  unsetenv("LD_PRELOAD");
}

// A child that inherits NCCL_PROFILER_PLUGIN but not LD_PRELOAD (issue 11 item 4).
TEST(NcclPluginEnv, NotPreloadedDeclines) {
  char tmpl[] = "/tmp/laggard-preload-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string self = dir + "/liblaggard.so";
  std::ofstream(self) << "x";
  EXPECT_TRUE(listed_in_ld_preload(self.c_str(), self));
  EXPECT_TRUE(listed_in_ld_preload(("/lib/libfoo.so:" + self + " /lib/libbar.so").c_str(), self));
  EXPECT_TRUE(listed_in_ld_preload("liblaggard.so", self));  // searched by the loader
  EXPECT_FALSE(listed_in_ld_preload(nullptr, self));
  EXPECT_FALSE(listed_in_ld_preload("", self));
  EXPECT_FALSE(listed_in_ld_preload("/elsewhere/liblaggard.so", self));
  EXPECT_FALSE(listed_in_ld_preload("/lib/libfoo.so", self));
  PluginEnvInput in;
  in.current = "liblaggard.so";
  in.preloaded = false;
  in.self_path = self;
  PluginEnvDecision d = decide_plugin_env(in);
  EXPECT_FALSE(d.set_to);
  EXPECT_EQ(d.status.rfind("off: not preloaded", 0), 0u) << d.status;
  EXPECT_TRUE(d.warning.empty());

  unsetenv("LD_PRELOAD");
  setenv("NCCL_PROFILER_PLUGIN", "liblaggard.so", 1);
  EXPECT_EQ(offer_plugin_at_load(Config{}, self, true).rfind("off: not preloaded", 0), 0u);
  EXPECT_FALSE(plugin_allowed());
  unsetenv("NCCL_PROFILER_PLUGIN");
  std::filesystem::remove_all(dir);
}

// KernelCh gating (issue 11 item 1): NVIDIA/nccl#2039 (2.27 proxy append overflow) and #2326
// (no room in /dev/shm for the profiler's proxy connection).
TEST(NcclKernelEvents, OffWithTheV4TableUnlessAsked) {
  KernelEventsDecision d = decide_kernel_events(-1, 4, 8ll << 30, 0);
  EXPECT_FALSE(d.on);
  EXPECT_NE(d.status.find("#2039"), std::string::npos);
  EXPECT_TRUE(decide_kernel_events(1, 4, 8ll << 30, 0).on);
  for (int table : {5, 6}) EXPECT_TRUE(decide_kernel_events(-1, table, 8ll << 30, 0).on) << table;
}

// Issue 27: the free space of /dev/shm against what the communicator's local ranks will take
// (one ops pool of ~32.6 MiB each: proxy.cc proxyProgressInit), not its size.
TEST(NcclKernelEvents, OffWithAWarningWhenDevShmHasNoRoomForTheCommunicator) {
  EXPECT_EQ(kProxyOpsPoolBytes, 34'209'792);  // 232 x 2048 x 72
  // 8 local ranks (16 ranks on 2 nodes): 8 pools, plus a quarter.
  EXPECT_EQ(shm_needed_for_comm(16, 2), 8 * kProxyOpsPoolBytes * 5 / 4);
  EXPECT_EQ(shm_needed_for_comm(4, 4), kProxyOpsPoolBytes * 5 / 4);
  EXPECT_EQ(shm_needed_for_comm(5, 2), 3 * kProxyOpsPoolBytes * 5 / 4);
  const int64_t need = shm_needed_for_comm(16, 2);
  KernelEventsDecision d = decide_kernel_events(-1, 5, 300ll << 20, need);  // a 1 GiB tmpfs, 300 MiB left
  EXPECT_FALSE(d.on);
  EXPECT_NE(d.status.find("300 MiB free"), std::string::npos) << d.status;
  EXPECT_NE(d.status.find("326 MiB"), std::string::npos) << d.status;
  EXPECT_NE(d.warning.find("LAGGARD_NCCL_KERNEL_EVENTS=1"), std::string::npos) << d.warning;
  EXPECT_TRUE(decide_kernel_events(-1, 5, 400ll << 20, need).on);
  EXPECT_TRUE(decide_kernel_events(1, 5, 64ll << 20, need).on);
  EXPECT_TRUE(decide_kernel_events(-1, 5, -1, need).on);  // unknown: not held against the job
}

TEST(NcclKernelEvents, SwitchedOff) {
  KernelEventsDecision d = decide_kernel_events(0, 6, 8ll << 30, 0);
  EXPECT_FALSE(d.on);
  EXPECT_EQ(d.status, "off: LAGGARD_NCCL_KERNEL_EVENTS=0");
}

// Issue 27: the profiler plugin NCCL would have loaded had laggard not set NCCL_PROFILER_PLUGIN.
TEST(NcclDisplacedPlugin, DefaultPluginOnTheSearchPathOrANetPluginsTable) {
  const std::string dir = std::filesystem::temp_directory_path() / ("laggard-displaced-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(find_displaced_profiler({"/nonexistent", dir}, {}, 6), "");
  std::ofstream(dir + "/libnccl-profiler.so") << "";
  EXPECT_EQ(find_displaced_profiler({"/nonexistent", dir}, {}, 6), "libnccl-profiler.so in " + dir);
  std::filesystem::remove(dir + "/libnccl-profiler.so");
  std::vector<LoadedLibrary> loaded = {{"/opt/x/libnccl-net-ofi.so", true}, {"/usr/lib/libfoo.so", true}};
  EXPECT_EQ(find_displaced_profiler({dir}, loaded, 5), "the profiler table of the net plugin /opt/x/libnccl-net-ofi.so");
  EXPECT_EQ(find_displaced_profiler({dir}, loaded, 4), "");  // NCCL 2.27 has no such fallback
  loaded[0].has_profiler_table = false;
  EXPECT_EQ(find_displaced_profiler({dir}, loaded, 6), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laggard::nccl
