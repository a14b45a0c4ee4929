// The laggard command line.
#include <algorithm>
#include <csignal>
#include <initializer_list>
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

// Exit codes (README "Exit codes"): 0 done; 1 done, but some input was skipped (import, cat);
// 2 a usage error, or nothing could be read or written; 3 stragglers found (report
// --fail-on-stragglers); `laggard run` returns its command's status.
constexpr int kUsageError = 2;

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

// Each subcommand: its options (add) and what it does once they are parsed (execute).
struct Command {
  CLI::App* cmd = nullptr;
  virtual ~Command() = default;
  virtual int execute() = 0;
};

// Everything from CMD on belongs to CMD, untouched; "--" before it is optional.
struct RunCommand : Command {
  laggard::cli::RunOptions o;
  bool report = false;
  double flush_s = 0;
  std::vector<std::string> after_dashes;  // set by main: CLI11 would reorder CMD's words

  void add(CLI::App& app) {
    cmd = app.add_subcommand("run", "run CMD with liblaggard.so preloaded");
    cmd->add_option("--out", o.out_dir, "output directory (LAGGARD_OUT)")->capture_default_str();
    cmd->add_option("--sections", o.sections, "keep only NVTX sections matching this regex");
    cmd->add_option("--nproc", o.nproc, "start N local ranks (sets RANK, LOCAL_RANK, WORLD_SIZE)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--flush-s", flush_s, "seconds between flushes (LAGGARD_FLUSH_S)")
        ->check(CLI::Range(0.05, 86400.0));
    cmd->add_option("--log", o.log, "quiet, warn, info or debug (LAGGARD_LOG)")
        ->check(CLI::IsMember({"quiet", "warn", "info", "debug"}));
    cmd->add_option("--lib", o.library, "liblaggard.so to preload (default: beside laggard)");
    cmd->add_flag("--report", report, "print the report when the command ends");
    cmd->add_flag("--quiet", o.quiet, "no closing line on stderr");
    cmd->prefix_command();
  }

  std::string usage() const {
    return UsageFormatter().make_usage(cmd, "") + "Run with --help for more information.\n";
  }

  // Before `--` (or before CMD) only laggard's own options: a misspelt one (--nprocs) must not
  // silently become the command or vanish.
  bool take_command() {
    std::vector<std::string> before_cmd = cmd->remaining();
    if (!after_dashes.empty() && !before_cmd.empty()) {
      std::cerr << "laggard run: unknown option '" << before_cmd.front() << "' before --\n" << usage();
      return false;
    }
    if (after_dashes.empty() && !before_cmd.empty() && before_cmd.front().rfind("-", 0) == 0) {
      std::cerr << "laggard run: unknown option '" << before_cmd.front() << "'\n" << usage();
      return false;
    }
    o.command = after_dashes.empty() ? before_cmd : after_dashes;
    return true;
  }

  // One report per launch inside the command (two srun steps: two runs), the last written last.
  static void report_each_run(const laggard::cli::RunResult& r) {
    const std::vector<std::string> dirs = r.run_dirs.empty() ? std::vector<std::string>{r.run_dir} : r.run_dirs;
    for (size_t i = 0; i < dirs.size(); ++i) {
      if (dirs.size() > 1) std::cout << (i ? "\n" : "") << "== run " << dirs[i] << " ==\n";
      laggard::cli::ReportOptions ro;
      ro.dir = dirs[i];
      laggard::cli::report_command(ro, std::cout, std::cerr);
    }
  }

  int execute() override {
    if (!take_command()) return 2;
    if (flush_s > 0) o.flush_s = flush_s;
    o.report_after = report;
    try {
      laggard::cli::RunResult r = laggard::cli::run_command(o);
      if (report) report_each_run(r);
      if (r.term_signal) {  // die of the command's signal, as a shell would report it
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
};

struct ReportCommand : Command {
  laggard::cli::ReportOptions o;
  std::string cut_ranks, cut_hosts, cut_steps;
  double divergence_us = 0, launch_cut_us = 100, runtime_cut_us = 50;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("report", "merge all ranks of a run and name the stragglers");
    cmd->add_option("dir", o.dir, "run directory, or an output directory holding runs")->required();
    add_outputs();
    add_scores();
    add_cut();
    add_analyses();
  }

  void add_outputs() {
    cmd->add_option("--format", o.format, "text, json or csv (one file per table in the directory -o names)")
        ->check(CLI::IsMember({"text", "json", "csv"}))->capture_default_str();
    cmd->add_option("-o,--output", o.output, "write the report to this file (--format csv: this directory)");
    cmd->add_option("--html", o.html, "also write the report as one self-contained HTML page to this file");
    cmd->add_option("--run", o.read.run_id, "run id to report when the directory holds several");
    cmd->add_option("--world-size", o.read.expect_world_size, "expected number of ranks")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_flag("--fail-on-stragglers", o.fail_on_stragglers, "exit with 3 when stragglers are found");
    cmd->add_option("--top", o.top, "rows in the text tables")->check(CLI::Range(1, 100000))->capture_default_str();
  }

  void add_scores() {
    cmd->add_option("--relative-threshold", o.scores.relative_threshold,
                    "relative score below which a rank is a straggler")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--individual-threshold", o.scores.individual_threshold,
                    "individual score below which a rank is a straggler")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--min-share", o.scores.min_share,
                    "share of its rank's captured time (0-1) a section needs before it is listed as a straggler")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--window-s", o.scores.window_s, "report window in seconds (default: the capture flush interval)")
        ->check(CLI::Range(0.001, 1e7));
  }

  void add_cut() {
    cmd->add_option("--step-section", o.analyses.step_section,
                    "NVTX section that marks a training step (default: the most frequent top-level one)");
    cmd->add_option("--ranks", cut_ranks, "analyse only these ranks, e.g. 0,4-7");
    cmd->add_option("--hosts", cut_hosts, "analyse only the ranks on these hosts (comma-separated)");
    cmd->add_option("--steps", cut_steps, "analyse only these steps, e.g. 100:200");
    cmd->add_option("--sections", o.cut.sections, "analyse only NVTX sections (and their kernels) matching this regex");
  }

  void add_analyses() {
    laggard::report::ExcessOptions& excess = o.analyses.verdict.excess;
    cmd->add_option("--divergence-us", divergence_us,
                    "time-to-kernel-end divergence that counts (default: max(20 us, 5 % of the median step))")
        ->check(CLI::Range(0.0, 1e9));
    cmd->add_option("--min-cost", excess.min_cost_share,
                    "a finding must cost the job at least this share of the median step time")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--min-steps", excess.min_steps,
                    "a transient finding lasts at least this many consecutive steps (or 2 report windows)")
        ->check(CLI::Range(2, 1'000'000))->capture_default_str();
    cmd->add_option("--false-alarm-rate", excess.false_alarm_rate,
                    "expected false findings per run that sets the significance threshold")
        ->check(CLI::Range(1e-9, 1.0))->capture_default_str();
    cmd->add_option("--kernel-wait-ns", o.analyses.breakdown.kernel_wait_ns, "gaps shorter than this are kernel wait (HTA)")
        ->check(CLI::Range(0, 1'000'000'000))->capture_default_str();
    cmd->add_flag("--hta-compatible", o.analyses.hta_compatible,
                  "also show HTA's own numbers (its definitions and trace-loading rules; docs/import.md)");
    cmd->add_flag("--nvrx-compatible", o.analyses.nvrx_compatible,
                  "also show NVRx's own reports: its scores and straggler lists by its rules (docs/report.md)");
    cmd->add_option("--nvrx-interval-s", o.analyses.nvrx.interval_s,
                    "with --nvrx-compatible: NVRx's report_time_interval (reports every ~this many seconds)")
        ->check(CLI::Range(1e-6, 1e9))->capture_default_str();
    cmd->add_option("--nvrx-every", o.analyses.nvrx.every,
                    "with --nvrx-compatible: report after every N iterations instead (generate_report() when "
                    "iteration % N == 0)")
        ->check(CLI::Range(1, 1'000'000'000));
    cmd->add_option("--launch-delay-cutoff-us", launch_cut_us, "launch delay outlier cut-off (HTA)")
        ->check(CLI::Range(0.0, 1e9))->capture_default_str();
    cmd->add_option("--runtime-cutoff-us", runtime_cut_us, "launch call duration outlier cut-off (HTA)")
        ->check(CLI::Range(0.0, 1e9))->capture_default_str();
  }

  bool take_cut() {
    try {
      if (!cut_ranks.empty()) o.cut.ranks = laggard::report::parse_rank_list(cut_ranks);
      if (!cut_steps.empty()) o.cut.steps = laggard::report::parse_step_range(cut_steps);
      std::stringstream hosts(cut_hosts);
      for (std::string h; std::getline(hosts, h, ',');)
        if (!h.empty()) o.cut.hosts.insert(h);
      return true;
    } catch (const std::exception& e) {
      std::cerr << "laggard report: " << e.what() << '\n';
      return false;
    }
  }

  int execute() override {
    if (!take_cut()) return 2;
    o.analyses.jitter.divergence_ns = divergence_us * 1e3;
    o.analyses.breakdown.launch_delay_cutoff_ns = launch_cut_us * 1e3;
    o.analyses.breakdown.runtime_cutoff_ns = runtime_cut_us * 1e3;
    o.exits_after = true;
    return laggard::cli::report_command(o, std::cout, std::cerr);
  }
};

struct DiffCommand : Command {
  laggard::cli::DiffOptions o;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("diff", "compare two runs: sections and kernels added, removed or changed");
    cmd->add_option("a", o.dir_a, "run directory (or output directory) A")->required();
    cmd->add_option("b", o.dir_b, "run directory (or output directory) B")->required();
    cmd->add_option("--run-a", o.run_a, "run id in A when it holds several");
    cmd->add_option("--run-b", o.run_b, "run id in B when it holds several");
    cmd->add_option("--format", o.format, "text or json")->check(CLI::IsMember({"text", "json"}));
    cmd->add_option("--threshold", o.threshold, "relative change that counts")->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();
    cmd->add_option("--top", o.top, "rows per table")->check(CLI::Range(1, 100000))->capture_default_str();
  }
  int execute() override { return laggard::cli::diff_command(o, std::cout, std::cerr); }
};

struct TraceCommand : Command {
  laggard::cli::TraceOptions o;
  std::string ranks, steps;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("trace", "write all ranks' timelines as one Chrome trace (Perfetto)");
    cmd->add_option("dir", o.dir, "run directory, or an output directory holding runs")->required();
    cmd->add_option("-o,--output", o.output, "trace file to write, e.g. trace.json")->required();
    cmd->add_option("--run", o.run_id, "run id when the directory holds several");
    cmd->add_option("--ranks", ranks, "only these ranks, e.g. 0,4-7");
    cmd->add_option("--steps", steps, "only these steps (each rank's own), e.g. 100:110");
    cmd->add_option("--step-section", o.step_section,
                    "NVTX section that marks a training step (default: the most frequent top-level one)");
  }
  int execute() override {
    try {
      if (!ranks.empty()) o.cut.ranks = laggard::report::parse_rank_list(ranks);
      if (!steps.empty()) o.cut.steps = laggard::report::parse_step_range(steps);
    } catch (const std::exception& e) {
      std::cerr << "laggard trace: " << e.what() << '\n';
      return 2;
    }
    return laggard::cli::trace_command(o, std::cerr);
  }
};

struct StacksCommand : Command {
  laggard::cli::StacksOptions o;
  bool no_lines = false;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("stacks", "merge the ranks' hang reports and name the rank(s) behind");
    cmd->add_option("dir", o.dir, "run directory, or an output directory holding runs")->required();
    cmd->add_option("--format", o.format, "text or json")->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    cmd->add_flag("--no-lines", no_lines, "skip file:line lookup (addr2line)");
  }
  int execute() override {
    o.symbolize = !no_lines;
    return laggard::cli::stacks_command(o, std::cout, std::cerr);
  }
};

struct CtlCommand : Command {
  laggard::cli::CtlOptions o;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("ctl", "pause or resume capture of a running job, or capture for N seconds");
    cmd->add_option("dir", o.dir, "run directory (LAGGARD_OUT/RUN_ID), or an output directory holding one run")
        ->required();
    cmd->add_option("command", o.command, "pause, resume, or window (then SECONDS)")
        ->required()->check(CLI::IsMember({"pause", "resume", "window"}));
    cmd->add_option("seconds", o.seconds, "window: seconds of capture before pausing again")
        ->check(CLI::Range(int64_t{1}, int64_t{7 * 24 * 3600}));
    cmd->add_option("--run", o.run_id, "run id when the directory holds several");
  }
  int execute() override { return laggard::cli::ctl_command(o, std::cout, std::cerr); }
};

struct ImportCommand : Command {
  laggard::cli::ImportOptions o;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("import", "turn PyTorch profiler (Kineto) or Nsight Systems traces into a laggard run");
    cmd->require_subcommand(1);
    for (const char* format : {"kineto", "nsys"}) {
      const bool kineto = std::string(format) == "kineto";
      auto* sub = cmd->add_subcommand(format, kineto ? "PyTorch profiler traces (.json, .json.gz; files or directories)"
                                                     : "Nsight Systems SQLite exports (.sqlite), one per rank");
      sub->add_option("inputs", o.inputs, kineto ? "trace files or directories" : "SQLite files")->required();
      sub->add_option("--out", o.out, "run directory to write (then: laggard report RUN_DIR)")->required();
      sub->add_option("--run-id", o.run_id, "run id to write (default: the run directory's name)");
      sub->add_option("--rank", o.rank,
                      kineto ? "rank of the one input file when it has no distributedInfo"
                             : "rank of the one input file (default: from its name, e.g. rank3)")
          ->check(CLI::Range(0, 1 << 20));
      sub->callback([this, format] { o.format = format; });
    }
  }
  int execute() override { return laggard::cli::import_command(o, std::cout, std::cerr); }
};

struct WatchCommand : Command {
  laggard::cli::WatchOptions o;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("watch", "live view of a running job's scores and stragglers; --serve for Prometheus");
    cmd->add_option("dir", o.dir, "run directory, or an output directory holding runs")->required();
    cmd->add_option("--run", o.read.run_id, "run id to watch when the directory holds several (default: newest)");
    cmd->add_option("--interval", o.interval_s, "seconds between refreshes")->check(CLI::Range(0.05, 86400.0))
        ->capture_default_str();
    cmd->add_option("--serve", o.serve, "serve Prometheus metrics at http://HOST:PORT/metrics (HOST default 127.0.0.1)");
    cmd->add_option("--count", o.count, "stop after N refreshes (default: run until Ctrl-C)")->check(CLI::Range(1, 1 << 30));
    cmd->add_option("--top", o.top, "rows per table (default: fit the terminal)")->check(CLI::Range(1, 100000));
    cmd->add_option("--world-size", o.read.expect_world_size, "expected number of ranks")->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--relative-threshold", o.scores.relative_threshold,
                    "relative score below which a rank is a straggler")->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--individual-threshold", o.scores.individual_threshold,
                    "individual score below which a rank is a straggler")->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->add_option("--window-s", o.scores.window_s, "report window in seconds (default: the capture flush interval)")
        ->check(CLI::Range(0.001, 1e7));
    cmd->add_option("--step-section", o.step_section, "NVTX section that marks a training step");
    cmd->add_option("--max-section-series", o.max_section_series,
                    "--serve: above this many (rank, section) samples per metric, only straggler ranks get them")
        ->check(CLI::Range(size_t{0}, size_t{1} << 30))->capture_default_str();
  }
  int execute() override { return laggard::cli::watch_command(o, std::cout, std::cerr); }
};

struct CatCommand : Command {
  std::vector<std::string> files;
  bool pretty = false;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("cat", "print rank files (JSON or binary frames, any schema version) as JSON");
    cmd->add_option("files", files, "rank files (rank*.json, rank*.lgr), or run directories (their rank files)")
        ->required();
    cmd->add_flag("--pretty", pretty, "indent the JSON (default: one document per line)");
  }
  int execute() override { return laggard::cli::cat_command(files, pretty, std::cout, std::cerr); }
};

// The number of single-character edits between a and b (Levenshtein), for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The first word must name a subcommand: CLI11 would only say "A subcommand is required". Returns
// false, having said which word and what was meant, when it does not.
bool known_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].rfind("-", 0) == 0) return true;  // options (--help, --version) or nothing: CLI11's
  std::string names, closest;
  size_t best = 3;  // at most 2 edits away
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == args[0]) return true;
    names += (names.empty() ? "" : ", ") + sub->get_name();
    if (size_t d = edit_distance(args[0], sub->get_name()); d < best) best = d, closest = sub->get_name();
  }
  std::cerr << "laggard: unknown command '" << args[0] << "'";
  if (!closest.empty()) std::cerr << "; did you mean '" << closest << "'?";
  std::cerr << "\n  commands: " << names << "\n  laggard --help, or laggard COMMAND --help, says more\n";
  return false;
}

// `run`'s words after the first "--" are the command's, split off before CLI11 parses the rest.
std::vector<std::string> split_after_dashes(std::vector<std::string>& args) {
  std::vector<std::string> after;
  if (!args.empty() && args[0] == "run")
    if (auto it = std::find(args.begin(), args.end(), "--"); it != args.end()) {
      after.assign(it + 1, args.end());
      args.erase(it, args.end());
    }
  return after;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"laggard: find the straggler ranks of a multi-GPU job, no source change", "laggard"};
  app.formatter(std::make_shared<UsageFormatter>());
  app.set_version_flag("--version", LAGGARD_VERSION);
  app.require_subcommand(1);

  RunCommand run;
  ReportCommand report;
  DiffCommand diff;
  TraceCommand trace;
  StacksCommand stacks;
  CtlCommand ctl;
  ImportCommand import;
  WatchCommand watch;
  CatCommand cat;
  run.add(app);
  report.add(app);
  diff.add(app);
  trace.add(app);
  stacks.add(app);
  ctl.add(app);
  import.add(app);
  watch.add(app);
  cat.add(app);

  std::vector<std::string> args(argv + 1, argv + argc);
  if (!known_subcommand(app, args)) return kUsageError;
  run.after_dashes = split_after_dashes(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its own codes (105 a bad value, 106 a missing argument, 109 an
    // extra one, ...) all mean a usage error here, the tool's 2. --help and --version exit 0.
    return app.exit(e) == 0 ? 0 : kUsageError;
  }
  for (Command* c : std::initializer_list<Command*>{&run, &report, &diff, &trace, &stacks, &ctl, &import, &watch, &cat})
    if (*c->cmd) return c->execute();
  return kUsageError;  // require_subcommand(1) makes this unreachable
}
