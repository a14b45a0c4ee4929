// The laggard command line.
#include <algorithm>
#include <csignal>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cat_command.h"
#include "ctl_command.h"
#include "import_command.h"
#include "launcher.h"
#include "report_command.h"
#include "stacks.h"
#include "watch_command.h"

#ifndef LAGGARD_VERSION
#define LAGGARD_VERSION "dev"
#endif

namespace {

// Usage lines name the program and the full subcommand ("Usage: laggard run [OPTIONS] -- CMD
// [ARGS...]"): CLI11 2.1 prints only the subcommand's own name, and nothing after `--`.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    std::string path = app->get_name();
    for (const CLI::App* p = app->get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
    std::string usage = CLI::Formatter::make_usage(app, path);
    if (app->get_name() == "run" && !usage.empty() && usage.back() == '\n') {
      usage.pop_back();
      usage += " -- CMD [ARGS...]\n";
    }
    return usage;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"laggard: find the straggler ranks of a multi-GPU job, no source change", "laggard"};
  app.formatter(std::make_shared<UsageFormatter>());
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
  rep_cmd->add_option("--format", rep.format, "text, json or csv (one file per table in the directory -o names)")
      ->check(CLI::IsMember({"text", "json", "csv"}))->capture_default_str();
  rep_cmd->add_option("-o,--output", rep.output, "write the report to this file (--format csv: this directory)");
  rep_cmd->add_option("--html", rep.html, "also write the report as one self-contained HTML page to this file");
  rep_cmd->add_option("--run", rep.read.run_id, "run id to report when the directory holds several");
  rep_cmd->add_option("--world-size", rep.read.expect_world_size, "expected number of ranks")
      ->check(CLI::Range(1, 1 << 20));
  rep_cmd->add_option("--relative-threshold", rep.scores.relative_threshold,
                      "relative score below which a rank is a straggler")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--individual-threshold", rep.scores.individual_threshold,
                      "individual score below which a rank is a straggler")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--min-share", rep.scores.min_share,
                      "share of its rank's captured time (0-1) a section needs before it is listed as a straggler")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--window-s", rep.scores.window_s,
                      "report window in seconds (default: the capture flush interval)")
      ->check(CLI::Range(0.001, 1e7));
  rep_cmd->add_flag("--fail-on-stragglers", rep.fail_on_stragglers, "exit with 3 when stragglers are found");
  rep_cmd->add_option("--step-section", rep.analyses.step_section,
                      "NVTX section that marks a training step (default: the most frequent top-level one)");
  rep_cmd->add_option("--top", rep.top, "rows in the text tables")->check(CLI::Range(1, 100000))->capture_default_str();
  std::string cut_ranks, cut_hosts, cut_steps;
  rep_cmd->add_option("--ranks", cut_ranks, "analyse only these ranks, e.g. 0,4-7");
  rep_cmd->add_option("--hosts", cut_hosts, "analyse only the ranks on these hosts (comma-separated)");
  rep_cmd->add_option("--steps", cut_steps, "analyse only these steps, e.g. 100:200");
  rep_cmd->add_option("--sections", rep.cut.sections, "analyse only NVTX sections (and their kernels) matching this regex");
  double divergence_us = 0, launch_cut_us = 100, runtime_cut_us = 50;
  rep_cmd->add_option("--divergence-us", divergence_us,
                      "time-to-kernel-end divergence that counts (default: max(20 us, 5 % of the median step))")
      ->check(CLI::Range(0.0, 1e9));
  rep_cmd->add_option("--min-cost", rep.analyses.verdict.excess.min_cost_share,
                      "a finding must cost the job at least this share of the median step time")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  rep_cmd->add_option("--min-steps", rep.analyses.verdict.excess.min_steps,
                      "a transient finding lasts at least this many consecutive steps (or 2 report windows)")
      ->check(CLI::Range(2, 1'000'000))->capture_default_str();
  rep_cmd->add_option("--false-alarm-rate", rep.analyses.verdict.excess.false_alarm_rate,
                      "expected false findings per run that sets the significance threshold")
      ->check(CLI::Range(1e-9, 1.0))->capture_default_str();
  rep_cmd->add_option("--kernel-wait-ns", rep.analyses.breakdown.kernel_wait_ns,
                      "gaps shorter than this are kernel wait (HTA)")->check(CLI::Range(0, 1'000'000'000))
      ->capture_default_str();
  rep_cmd->add_flag("--hta-compatible", rep.analyses.hta_compatible,
                    "also show HTA's own numbers (its definitions and trace-loading rules; see README)");
  rep_cmd->add_option("--launch-delay-cutoff-us", launch_cut_us, "launch delay outlier cut-off (HTA)")
      ->check(CLI::Range(0.0, 1e9))->capture_default_str();
  rep_cmd->add_option("--runtime-cutoff-us", runtime_cut_us, "launch call duration outlier cut-off (HTA)")
      ->check(CLI::Range(0.0, 1e9))->capture_default_str();

  laggard::cli::DiffOptions diff;
  auto* diff_cmd = app.add_subcommand("diff", "compare two runs: sections and kernels added, removed or changed");
  diff_cmd->add_option("a", diff.dir_a, "run directory (or output directory) A")->required();
  diff_cmd->add_option("b", diff.dir_b, "run directory (or output directory) B")->required();
  diff_cmd->add_option("--run-a", diff.run_a, "run id in A when it holds several");
  diff_cmd->add_option("--run-b", diff.run_b, "run id in B when it holds several");
  diff_cmd->add_option("--format", diff.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  diff_cmd->add_option("--threshold", diff.threshold, "relative change that counts")->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  diff_cmd->add_option("--top", diff.top, "rows per table")->check(CLI::Range(1, 100000))->capture_default_str();

  laggard::cli::TraceOptions trace;
  std::string trace_ranks;
  auto* trace_cmd = app.add_subcommand("trace", "write all ranks' timelines as one Chrome trace (Perfetto)");
  trace_cmd->add_option("dir", trace.dir, "run directory, or an output directory holding runs")->required();
  trace_cmd->add_option("-o,--output", trace.output, "trace file to write")->capture_default_str();
  trace_cmd->add_option("--run", trace.run_id, "run id when the directory holds several");
  trace_cmd->add_option("--ranks", trace_ranks, "only these ranks, e.g. 0,4-7");
  std::string trace_steps;
  trace_cmd->add_option("--steps", trace_steps, "only these steps (each rank's own), e.g. 100:110");
  trace_cmd->add_option("--step-section", trace.step_section,
                        "NVTX section that marks a training step (default: the most frequent top-level one)");

  laggard::cli::StacksOptions stacks;
  bool no_lines = false;
  auto* stacks_cmd = app.add_subcommand("stacks", "merge the ranks' hang reports and name the rank(s) behind");
  stacks_cmd->add_option("dir", stacks.dir, "run directory, or an output directory holding runs")->required();
  stacks_cmd->add_option("--format", stacks.format, "text or json")->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  stacks_cmd->add_flag("--no-lines", no_lines, "skip file:line lookup (addr2line)");
  laggard::cli::CtlOptions ctl;
  auto* ctl_cmd = app.add_subcommand("ctl", "pause or resume capture of a running job, or capture for N seconds");
  ctl_cmd->add_option("dir", ctl.dir, "run directory (LAGGARD_OUT/RUN_ID), or an output directory holding one run")
      ->required();
  ctl_cmd->add_option("command", ctl.command, "pause, resume, or window (then SECONDS)")
      ->required()->check(CLI::IsMember({"pause", "resume", "window"}));
  ctl_cmd->add_option("seconds", ctl.seconds, "window: seconds of capture before pausing again")
      ->check(CLI::Range(int64_t{1}, int64_t{7 * 24 * 3600}));
  ctl_cmd->add_option("--run", ctl.run_id, "run id when the directory holds several");
  laggard::cli::ImportOptions imp;
  auto* import_cmd = app.add_subcommand("import", "turn PyTorch profiler (Kineto) or Nsight Systems traces into a laggard run");
  import_cmd->require_subcommand(1);
  for (const char* format : {"kineto", "nsys"}) {
    bool kineto = std::string(format) == "kineto";
    auto* sub = import_cmd->add_subcommand(format, kineto ? "PyTorch profiler traces (.json, .json.gz; files or directories)"
                                                          : "Nsight Systems SQLite exports (.sqlite), one per rank");
    sub->add_option("inputs", imp.inputs, kineto ? "trace files or directories" : "SQLite files")->required();
    sub->add_option("--out", imp.out, "run directory to write (then: laggard report RUN_DIR)")->required();
    sub->add_option("--run-id", imp.run_id, "run id to write (default: the run directory's name)");
    sub->add_option("--rank", imp.rank,
                    kineto ? "rank of the one input file when it has no distributedInfo"
                           : "rank of the one input file (default: from its name, e.g. rank3)")
        ->check(CLI::Range(0, 1 << 20));
    sub->callback([&imp, format] { imp.format = format; });
  }

  laggard::cli::WatchOptions watch;
  auto* watch_cmd = app.add_subcommand("watch", "live view of a running job's scores and stragglers; --serve for Prometheus");
  watch_cmd->add_option("dir", watch.dir, "run directory, or an output directory holding runs")->required();
  watch_cmd->add_option("--run", watch.read.run_id, "run id to watch when the directory holds several (default: newest)");
  watch_cmd->add_option("--interval", watch.interval_s, "seconds between refreshes")->check(CLI::Range(0.05, 86400.0))
      ->capture_default_str();
  watch_cmd->add_option("--serve", watch.serve, "serve Prometheus metrics at http://HOST:PORT/metrics (HOST default 127.0.0.1)");
  watch_cmd->add_option("--count", watch.count, "stop after N refreshes (default: run until Ctrl-C)")->check(CLI::Range(1, 1 << 30));
  watch_cmd->add_option("--top", watch.top, "rows per table (default: fit the terminal)")->check(CLI::Range(1, 100000));
  watch_cmd->add_option("--world-size", watch.read.expect_world_size, "expected number of ranks")->check(CLI::Range(1, 1 << 20));
  watch_cmd->add_option("--relative-threshold", watch.scores.relative_threshold,
                        "relative score below which a rank is a straggler")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  watch_cmd->add_option("--individual-threshold", watch.scores.individual_threshold,
                        "individual score below which a rank is a straggler")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  watch_cmd->add_option("--window-s", watch.scores.window_s, "report window in seconds (default: the capture flush interval)")
      ->check(CLI::Range(0.001, 1e7));
  watch_cmd->add_option("--step-section", watch.step_section, "NVTX section that marks a training step");

  std::vector<std::string> cat_files;
  bool cat_pretty = false;
  auto* cat_cmd = app.add_subcommand("cat", "print rank files (JSON or binary frames, any schema version) as JSON");
  cat_cmd->add_option("files", cat_files, "rank files (rank*.json, rank*.lgr)")->required();
  cat_cmd->add_flag("--pretty", cat_pretty, "indent the JSON (default: one document per line)");

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

  auto run_usage = [&] {
    return UsageFormatter().make_usage(run_cmd, "") + "Run with --help for more information.\n";
  };
  if (*run_cmd) {
    // Before `--` (or before CMD) only laggard's own options: a misspelt one (--nprocs) must not
    // silently become the command or vanish.
    std::vector<std::string> before_cmd = run_cmd->remaining();
    if (!after_dashes.empty() && !before_cmd.empty()) {
      std::cerr << "laggard run: unknown option '" << before_cmd.front() << "' before --\n" << run_usage();
      return 2;
    }
    if (after_dashes.empty() && !before_cmd.empty() && before_cmd.front().rfind("-", 0) == 0) {
      std::cerr << "laggard run: unknown option '" << before_cmd.front() << "'\n" << run_usage();
      return 2;
    }
    run.command = after_dashes.empty() ? before_cmd : after_dashes;
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
  if (*cat_cmd) return laggard::cli::cat_command(cat_files, cat_pretty, std::cout, std::cerr);
  if (*stacks_cmd) {
    stacks.symbolize = !no_lines;
    return laggard::cli::stacks_command(stacks, std::cout, std::cerr);
  }
  if (*watch_cmd) return laggard::cli::watch_command(watch, std::cout, std::cerr);
  if (*import_cmd) return laggard::cli::import_command(imp, std::cout, std::cerr);
  if (*ctl_cmd) return laggard::cli::ctl_command(ctl, std::cout, std::cerr);
  if (*diff_cmd) return laggard::cli::diff_command(diff, std::cout, std::cerr);
  if (*trace_cmd) {
    try {
      if (!trace_ranks.empty()) trace.cut.ranks = laggard::report::parse_rank_list(trace_ranks);
      if (!trace_steps.empty()) trace.cut.steps = laggard::report::parse_step_range(trace_steps);
    } catch (const std::exception& e) {
      std::cerr << "laggard trace: " << e.what() << '\n';
      return 2;
    }
    return laggard::cli::trace_command(trace, std::cerr);
  }
  try {
    if (!cut_ranks.empty()) rep.cut.ranks = laggard::report::parse_rank_list(cut_ranks);
    if (!cut_steps.empty()) rep.cut.steps = laggard::report::parse_step_range(cut_steps);
    std::stringstream hosts(cut_hosts);
    for (std::string h; std::getline(hosts, h, ',');)
      if (!h.empty()) rep.cut.hosts.insert(h);
  } catch (const std::exception& e) {
    std::cerr << "laggard report: " << e.what() << '\n';
    return 2;
  }
  rep.analyses.jitter.divergence_ns = divergence_us * 1e3;
  rep.analyses.breakdown.launch_delay_cutoff_ns = launch_cut_us * 1e3;
  rep.analyses.breakdown.runtime_cutoff_ns = runtime_cut_us * 1e3;
  return laggard::cli::report_command(rep, std::cout, std::cerr);
}
