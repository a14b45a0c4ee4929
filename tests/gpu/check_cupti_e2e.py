#!/usr/bin/env python3
"""Checks a laggard run of tests/gpu/cupti_e2e.cu (driven by scripts/gpu-e2e-cupti).

    check_cupti_e2e.py OUT_DIR STDOUT_FILE REPORT_JSON SLOW_RANK SLOW_SECTION

OUT_DIR: laggard's output directory; STDOUT_FILE: the ranks' stdout (one JSON line each, what
they launched); REPORT_JSON: `laggard report --format json`. Exits 1 on any mismatch and prints
every check either way.
"""
import glob
import json
import os
import subprocess
import sys

KERNELS = ["fwd_kernel", "bwd_kernel", "graph_kernel", "side_kernel", "stray_kernel"]

failures = []


def rank_files(pattern_dir):
    """Rank files of either format: binary frames (rank*.lgr, the default) or JSON segments."""
    return sorted(glob.glob(os.path.join(pattern_dir, "rank*.lgr")) + glob.glob(os.path.join(pattern_dir, "rank*.json")))


def load_rank_file(path):
    """Any rank file as the JSON of docs/schema.md, through `laggard cat` ($LAGGARD_CLI)."""
    cli = os.environ.get("LAGGARD_CLI", "build/laggard")
    return json.loads(subprocess.run([cli, "cat", path], check=True, stdout=subprocess.PIPE, text=True).stdout)


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)


def short(name):
    for k in KERNELS:
        if k in name:
            return k
    return name


def main():
    out_dir, stdout_file, report_file, slow_rank, slow_section = sys.argv[1:6]
    slow_rank = int(slow_rank)
    launched = {}
    with open(stdout_file) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{") and '"launched"' in line:
                d = json.loads(line)
                launched[d["rank"]] = d["launched"]
    check(len(launched) >= 2, f"every rank printed what it launched ({sorted(launched)})")

    files = rank_files(os.path.join(out_dir, "*"))
    by_rank = {}
    for path in files:
        d = load_rank_file(path)
        by_rank.setdefault(d["rank"], []).append(d)
    check(sorted(by_rank) == sorted(launched), f"one rank file set per rank ({sorted(by_rank)})")

    for rank, segs in sorted(by_rank.items()):
        print(f"rank {rank}:")
        counts, graph_flags, tids = {}, {}, {}
        last = max(segs, key=lambda s: s["segment"])
        for seg in segs:
            for w in seg["windows"]:
                g = w.get("gpu")
                if not g:
                    continue
                s = g["strings"]
                for k in g["kernels"]:
                    section = "(no section)" if k["section"] is None else s[k["section"]]
                    key = f"{section}/{short(s[k['name']])}"
                    counts[key] = counts.get(key, 0) + k["count"]
                    if short(s[k["name"]]) == "graph_kernel":
                        graph_flags[k["graph"]] = graph_flags.get(k["graph"], 0) + k["count"]
                rec = g["records"]
                for i in range(len(rec["kind"])):
                    sec = rec["section"][i]
                    tids.setdefault("(none)" if sec < 0 else s[sec], set()).add(rec["tid"][i])
                    start = w["start_ns"] + rec["start_offset_ns"][i]
                    if not (seg["process_start_ns"] - 10**9 <= start <= seg["data_end_ns"] + 10**9):
                        check(False, f"record {i} of window {w['index']} at {start} lies outside the process lifetime")
                        break
        for key, n in sorted(launched.get(rank, {}).items()):
            check(counts.get(key, 0) == n, f"{key}: launched {n}, captured {counts.get(key, 0)}")
        extra = {k: v for k, v in counts.items() if k not in launched.get(rank, {})}
        check(not extra, f"nothing captured that was not launched ({extra})")
        check(graph_flags.get(False, 0) == 0 and graph_flags.get(True, 0) > 0,
              f"graph kernels are marked as graph launches ({graph_flags})")
        main_tids = tids.get("forward", set()) | tids.get("backward", set())
        check(bool(tids.get("side")) and not (tids.get("side", set()) & main_tids),
              f"side-thread kernels carry the side thread's id ({tids.get('side')} vs {main_tids})")
        d = last["dropped"]
        for k in ["cupti_records_dropped", "gpu_buffer_full", "unmatched_correlation", "gpu_no_timestamp"]:
            check(d.get(k, 0) == 0, f"dropped.{k} == 0 (is {d.get(k)})")
        off = last["clock"].get("gpu_offset_ns")
        unc = last["clock"].get("gpu_offset_uncertainty_ns")
        print(f"  info  CUPTI clock offset {off} ns (bracket {unc} ns), CUPTI: {last['capture'].get('cupti')}"
              f" {last['capture'].get('cupti_library', '')}")
        check(off is not None and abs(off) < 10**9, "CUPTI clock offset measured and plausible")

    with open(report_file) as f:
        rep = json.load(f)
    gpu_flags = [s for s in rep["stragglers"] if s["scope"] == "gpu"]
    print("report: GPU stragglers:", json.dumps(gpu_flags))
    check(any(s["rank"] == slow_rank and s["section"] == slow_section and s["metric"] == "relative"
              for s in gpu_flags), f"rank {slow_rank} flagged in [GPU] {slow_section}")
    check(any(s["rank"] == slow_rank and s["section"] == "" and s["metric"] == "relative" for s in gpu_flags),
          f"rank {slow_rank} flagged by its rank-level GPU score")
    check(all(s["rank"] == slow_rank for s in gpu_flags), "no other rank flagged on GPU")
    for r in rep["gpu"]["ranks"]:
        sec = r["sections"].get(slow_section, {})
        print(f"  info  rank {r['rank']}: GPU relative {r['relative_score']}, individual {r['individual_score']}, "
              f"{slow_section} relative {sec.get('relative_score')}, kernels {r['kernels']}, "
              f"completeness {r['completeness']}")
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
