// The laggard command line.
#include <algorithm>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "launcher.h"
#include "report_command.h"

#ifndef LAGGARD_VERSION
#define LAGGARD_VERSION "dev"
#endif

int main(int argc, char** argv) {
  CLI::App app{"laggard: find the straggler ranks of a multi-GPU job, no source change"};
  app.set_version_flag("--version", LAGGARD_VERSION);
  app.require_subcommand(1);

  laggard::cli::RunOptions run;
  bool run_report = false;
  double flush_s = 0;
  auto* run_cmd = app.add_subcommand("run", "run CMD with liblaggard.so preloaded");
  run_cmd->add_option("--out", run.out_dir, "output directory (LAGGARD_OUT)")->capture_default_str();
  run_cmd->add_option("--sections", run.sections, "keep only NVTX sections matching this regex");
  run_cmd->add_option("--nproc", run.nproc, "start N local ranks (sets RANK, LOCAL_RANK, WORLD_SIZE)")
      ->check(CLI::Range(1, 4096));
  run_cmd->add_option("--flush-s", flush_s, "seconds between flushes (LAGGARD_FLUSH_S)")
      ->check(CLI::Range(0.05, 86400.0));
  run_cmd->add_option("--log", run.log, "quiet, warn, info or debug (LAGGARD_LOG)")
      ->check(CLI::IsMember({"quiet", "warn", "info", "debug"}));
  run_cmd->add_option("--lib", run.library, "liblaggard.so to preload (default: beside laggard)");
  run_cmd->add_flag("--report", run_report, "print the report when the command ends");
  run_cmd->add_flag("--quiet", run.quiet, "no closing line on stderr");
  // Everything from CMD on belongs to CMD, untouched; "--" before it is optional.
  run_cmd->prefix_command();

  laggard::cli::ReportOptions rep;
  auto* rep_cmd = app.add_subcommand("report", "merge all ranks of a run and name the stragglers");
  rep_cmd->add_option("dir", rep.dir, "run directory, or an output directory holding runs")->required();
  rep_cmd->add_option("--format", rep.format, "text or json")->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  rep_cmd->add_option("-o,--output", rep.output, "write the report to this file");
  rep_cmd->add_option("--run", rep.read.run_id, "run id to report when the directory holds several");
  rep_cmd->add_option("--world-size", rep.read.expect_world_size, "expected number of ranks")
      ->check(CLI::Range(1, 1 << 20));
  rep_cmd->add_option("--relative-threshold", rep.scores.relative_threshold,
                      "relative score below which a rank is a straggler")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--individual-threshold", rep.scores.individual_threshold,
                      "individual score below which a rank is a straggler")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--window-s", rep.scores.window_s,
                      "report window in seconds (default: the capture flush interval)")
      ->check(CLI::Range(0.001, 1e7));
  rep_cmd->add_flag("--fail-on-stragglers", rep.fail_on_stragglers, "exit with 3 when stragglers are found");

  // Split at the first "--" after "run" ourselves: CLI11 would otherwise reorder CMD's words.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> after_dashes;
  if (!args.empty() && args[0] == "run")
    if (auto it = std::find(args.begin(), args.end(), "--"); it != args.end()) {
      after_dashes.assign(it + 1, args.end());
      args.erase(it, args.end());
    }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (*run_cmd) {
    run.command = after_dashes.empty() ? run_cmd->remaining() : after_dashes;
    if (flush_s > 0) run.flush_s = flush_s;
    run.report_after = run_report;
    try {
      laggard::cli::RunResult r = laggard::cli::run_command(run);
      if (run_report) {
        laggard::cli::ReportOptions ro;
        ro.dir = r.run_dir;
        laggard::cli::report_command(ro, std::cout, std::cerr);
      }
      if (r.term_signal) {
        std::cout.flush();
        signal(r.term_signal, SIG_DFL);
        raise(r.term_signal);
      }
      return r.exit_code;
    } catch (const std::exception& e) {
      std::cerr << "laggard run: " << e.what() << '\n';
      return 2;
    }
  }
  return laggard::cli::report_command(rep, std::cout, std::cerr);
}
