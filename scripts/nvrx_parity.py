#!/usr/bin/python3
"""laggard --nvrx-compatible against NVRx's own ReportGenerator (issue 30 item 6).

  nvrx_parity.py NVRX_CHECKOUT RUN_DIR LAGGARD_JSON EVERY

Reads RUN_DIR's JSON rank files (LAGGARD_FILE_FORMAT=json, or laggard-gen-synthetic --format json), builds
what NVRx's Detector would hold at each report (generate_report() after iterations 0, EVERY, 2*EVERY, ...:
every NVTX section a detection section, torch.median of its CPU times; kernels launched inside a section,
CuptiProfiler.cpp's float statistics), runs NVRx's real reporting.py ReportGenerator over them in one
process per rank (gloo, as NVRx's unit tests do), and compares every score and straggler list with
`laggard report --nvrx-compatible --nvrx-every EVERY --format json` (LAGGARD_JSON): exactly, bit for bit.
NVRx's code is loaded from NVRX_CHECKOUT at run time (src/nvidia_resiliency_ext/attribution/straggler/),
never copied into laggard. Needs Debian's python3-torch. Exit code 0 when everything matches.
"""
import glob
import importlib
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MAX_SAMPLES = 8 * 1024  # straggler.py deque(maxlen=8 * 1024); CuptiManager(statsMaxLenPerKernel=8 * 1024)


def load_nvrx(checkout, into):
    """NVRx's reporting modules as a package of their own (the straggler package's __init__ loads the CUPTI extension)."""
    src = os.path.join(checkout, "src/nvidia_resiliency_ext/attribution/straggler")
    pkg = os.path.join(into, "nvrx_straggler")
    os.makedirs(pkg, exist_ok=True)
    for f in ("reporting.py", "statistics.py", "dist_utils.py", "name_mapper.py"):
        shutil.copy(os.path.join(src, f), pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    sys.path.insert(0, into)
    return importlib.import_module("nvrx_straggler.reporting"), importlib.import_module("nvrx_straggler.statistics")


def read_rank(path_glob):
    """Sections (name -> [(end_ns, dur_ns)]), kernels ([(launch_ns, end_ns, dur_ns, key)]), host, data end."""
    sections, kernels, host, end, rank = {}, [], None, 0, None
    for path in sorted(glob.glob(path_glob)):
        f = json.load(open(path))
        host, rank = f["host"], f["rank"]
        for w in f["windows"]:
            end = max(end, w["end_ns"])
            for s in w["sections"]:
                o = s.get("occurrences", {})
                for st, d in zip(o.get("start_offset_ns", []), o.get("dur_ns", [])):
                    sections.setdefault(s["name"], []).append((w["start_ns"] + st + d, d))
            g = w.get("gpu")
            if not g:
                continue
            r, strings, shapes = g["records"], g["strings"], g["records"].get("shapes", [])
            for i, kind in enumerate(r["kind"]):
                if kind != 0 or r["section"][i] < 0:
                    continue
                sh = shapes[r["shape"][i]]
                key = "%s_blk_%d_%d_%d_grid_%d_%d_%d" % (strings[r["name"][i]], sh[3], sh[4], sh[5], sh[0], sh[1], sh[2])
                start = w["start_ns"] + r["start_offset_ns"][i]
                api = r["api_start_offset_ns"][i]
                launch = w["start_ns"] + api if api else start
                kernels.append((launch, start + r["dur_ns"][i], r["dur_ns"][i], key))
    return rank, host, sections, kernels, end


def kernel_stats(durs_ns):
    """CuptiProfiler.cpp computeStats, in float32: (end - start) / 1000.0f, sorted, median, accumulate(0.0f) / n."""
    d = np.sort(np.array([np.float32(np.float32(x) / np.float32(1000.0)) for x in durs_ns], dtype=np.float32))
    n = len(d)
    med = (d[n // 2 - 1] + d[n // 2]) / np.float32(2) if n % 2 == 0 else d[n // 2]
    acc = np.float32(0)
    for x in d:
        acc = np.float32(acc + x)
    return float(np.float32(med)), float(np.float32(acc / np.float32(n))), n


def summaries(S, ranks, bounds):
    """Per report, per rank: (section summaries, kernel summaries) as Detector passes them to generate_report."""
    out = []
    for k in range(len(bounds[0])):
        per_rank = []
        for r, (rank, host, sections, kernels, end) in enumerate(ranks):
            lo = bounds[r][k - 1] if k else -math.inf
            hi = bounds[r][k]
            ss = {}
            for name, occ in sorted(sections.items()):
                v = sorted((e, d) for e, d in occ if lo < e <= hi)[-MAX_SAMPLES:]
                if not v:
                    continue
                t = torch.tensor([d * 1e-6 for e, d in v], dtype=torch.float64)
                ss[name] = {S.MED: torch.median(t).item(), S.AVG: torch.mean(t).item(), S.NUM: len(v)}
            ks = {}
            by_key = {}
            for launch, kend, d, key in kernels:
                if lo < launch <= hi:
                    by_key.setdefault(key, []).append((kend, d))
            for key in sorted(by_key):
                med, avg, n = kernel_stats([d for e, d in sorted(by_key[key])[-MAX_SAMPLES:]])
                ks[key] = {S.MED: med, S.AVG: avg, S.NUM: n}
            per_rank.append((ss, ks))
        out.append(per_rank)
    return out


def worker(rank, world, store_path, pkg_dir, checkout, inputs, nodes, queue):
    reporting, statistics = load_nvrx(checkout, pkg_dir)
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank, world_size=world)
    gen = reporting.ReportGenerator(["relative_perf_scores", "individual_perf_scores"], gather_on_rank0=True,
                                    node_name=nodes[rank])
    results = []
    for per_rank in inputs:
        ss, ks = per_rank[rank]
        rep = gen.generate_report(ss, ks)
        if rank == 0:
            st = rep.identify_stragglers()
            results.append({
                "gpu_relative_perf_scores": dict(rep.gpu_relative_perf_scores),
                "gpu_individual_perf_scores": dict(rep.gpu_individual_perf_scores),
                "section_relative_perf_scores": {k: dict(v) for k, v in rep.section_relative_perf_scores.items()},
                "section_individual_perf_scores": {k: dict(v) for k, v in rep.section_individual_perf_scores.items()},
                "stragglers": {k: (sorted((s.rank, s.node) for s in v) if isinstance(v, set)
                                   else {n: sorted((s.rank, s.node) for s in ids) for n, ids in v.items()})
                               for k, v in st.items()},
            })
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def same(a, b):
    return (b is None and math.isnan(a)) or (b is not None and not math.isnan(a) and a == b)


def main():
    checkout, run_dir, laggard_json, every = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    lag = json.load(open(laggard_json))["nvrx"]
    files = sorted(glob.glob(os.path.join(run_dir, "rank*-seg*.json")))
    rank_ids = sorted({int(os.path.basename(p)[4:9]) for p in files})
    ranks = [read_rank(os.path.join(run_dir, "rank%05d-*-seg*.json" % r)) for r in rank_ids]
    # Steps: the "step" section's occurrences in start order; the report after iteration i ends where
    # iteration i + 1 starts (the rank's data end after the last).
    bounds = []
    for rank, host, sections, kernels, end in ranks:
        starts = sorted(e - d for e, d in sections["step"])
        after = list(range(0, len(starts), every))
        bounds.append([starts[i + 1] if i + 1 < len(starts) else end for i in after])
    nodes = [r[1] for r in ranks]
    with tempfile.TemporaryDirectory(prefix="laggard-nvrx-parity-") as tmp:
        reporting, statistics = load_nvrx(checkout, tmp)
        inputs = summaries(statistics.Statistic, ranks, bounds)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, len(ranks), os.path.join(tmp, "store"), tmp, checkout, inputs, nodes, q))
                 for r in range(len(ranks))]
        for p in procs:
            p.start()
        nvrx = q.get(timeout=600)
        for p in procs:
            p.join()
    bad = 0
    if len(nvrx) != len(lag["reports"]):
        print(f"reports: NVRx {len(nvrx)}, laggard {len(lag['reports'])}")
        return 1
    checked = 0
    for i, (n, l) in enumerate(zip(nvrx, lag["reports"])):
        for field in ("gpu_relative_perf_scores", "gpu_individual_perf_scores"):
            for r, v in n[field].items():
                checked += 1
                if not same(v, l[field].get(str(r))):
                    bad += 1
                    print(f"report {i} {field} rank {r}: NVRx {v!r}, laggard {l[field].get(str(r))!r}")
        for field in ("section_relative_perf_scores", "section_individual_perf_scores"):
            for s, per in n[field].items():
                for r, v in per.items():
                    checked += 1
                    got = l[field].get(s, {}).get(str(r), "missing")
                    if got == "missing" or not same(v, got):
                        bad += 1
                        print(f"report {i} {field} {s} rank {r}: NVRx {v!r}, laggard {got!r}")
        ls = l["stragglers"]
        for key in ("straggler_gpus_relative", "straggler_gpus_individual"):
            if n["stragglers"][key] != sorted((x["rank"], x["node"]) for x in ls[key]):
                bad += 1
                print(f"report {i} {key}: NVRx {n['stragglers'][key]}, laggard {ls[key]}")
        for key in ("straggler_sections_relative", "straggler_sections_individual"):
            want = {s: [tuple(x) for x in v] for s, v in n["stragglers"][key].items()}
            got = {s: sorted((x["rank"], x["node"]) for x in v) for s, v in ls[key].items()}
            if want != got:
                bad += 1
                print(f"report {i} {key}: NVRx {want}, laggard {got}")
    print(f"nvrx-parity: {len(nvrx)} reports, {checked} scores compared, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
