#!/usr/bin/python3
"""Reference pandas pipeline for the GTC 2020 per-kernel cross-rank statistics (issue 14).

Reads the same rank files as `laggard report`, computes what the report's jitter analysis lists
per kernel position (report/analyze/jitter.cpp, "Kernel positions over the whole run"), runs
`laggard report --format json` on the same directory, checks that both agree and prints the
time ratio. Per kernel (name, n-th launch of that name within the step):
  - each rank's mean GPU duration, mean gap (idle time on its stream before the kernel; 0 for
    NCCL kernels) and mean launch position over the comparable steps;
  - across ranks: median duration, min/max duration and their ranks, median gap, max gap and its
    rank, and the position (median of the ranks' mean positions, rounded).
Steps are the occurrences of the NVTX section named by --step-section (default "step"); a kernel
belongs to the step during which it was launched (host time). Only steps every rank has count.

Usage: bench/pandas_reference.py RUN_DIR [--laggard build/laggard] [--step-section step]

Debian's python3-pandas and python3-zstandard (scripts/setup installs them). load_rank() is the
one place that knows the per-kernel record layout of a file: JSON segments (docs/schema.md, "GPU")
or binary frames (docs/schema.md, "Version 5: binary kernel records"; decoded as
report/read/reader_frames.cpp does, with numpy).
"""
import argparse
import glob
import json
import os
import resource
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pandas as pd
import zstandard

KERNEL_COLUMNS = ["rank", "name", "section", "start", "end", "launch", "nccl", "device", "stream"]


FRAME_MAGIC = b"LGF5"
FRAME_HEAD = 20  # magic, compression + 3 reserved, stored, raw, crc32
RECORD_COLUMNS = ["kind", "flags", "copy_kind", "name", "section", "start", "dur", "api_start", "api_dur", "tid",
                  "correlation", "device", "stream", "shape", "bytes"]


def frames(data):
    """A frame file's windows: (header, window, gpu block bytes) per whole frame."""
    at = 0
    unzstd = zstandard.ZstdDecompressor()
    while at + FRAME_HEAD <= len(data) and data[at:at + 4] == FRAME_MAGIC:
        compression = data[at + 4]
        stored, raw, crc = struct.unpack_from("<III", data, at + 8)
        body = data[at + FRAME_HEAD:at + FRAME_HEAD + stored]
        if len(body) < stored or zlib.crc32(body) != crc:
            break  # a torn tail: the whole frames before it count, as in the reader
        payload = unzstd.decompress(body, max_output_size=raw) if compression == 1 else body
        parts, p = [], 0
        for _ in range(3):
            (n,) = struct.unpack_from("<I", payload, p)
            parts.append(payload[p + 4:p + 4 + n])
            p += 4 + n
        yield json.loads(parts[0]), json.loads(parts[1]), parts[2]
        at += FRAME_HEAD + stored


def unzigzag(v):
    v = v.astype(np.uint64)
    return (v >> np.uint64(1)).astype(np.int64) ^ -(v & np.uint64(1)).astype(np.int64)


def binary_records(block):
    """A frame's GPU block: its records' columns as numpy arrays (the kernel statistics after them are not needed)."""
    n, n_shapes = struct.unpack_from("<II", block, 0)
    at = 8 + 24 * n_shapes
    cols = {}
    for c in RECORD_COLUMNS:
        width = block[at]
        cols[c] = np.frombuffer(block, dtype=f"<u{width}", count=n, offset=at + 1)
        at += 1 + n * width
    return cols


def add_binary_records(rows, rank, t0, strings, block):
    r = binary_records(block)
    n = len(r["kind"])
    if not n:
        return
    names = np.array([""] + strings, dtype=object)  # column value = string index + 1, 0: none
    sections = np.array(["(no section)"] + strings, dtype=object)
    start = t0 + np.cumsum(unzigzag(r["start"]))
    api_dur = r["api_dur"].astype(np.int64)  # + 1, 0: unknown
    launch = np.where(api_dur > 0, start + unzigzag(r["api_start"]), start)
    rows["rank"].append(np.full(n, rank))
    rows["name"].append(names[r["name"]])
    rows["section"].append(sections[r["section"]])
    rows["start"].append(start)
    rows["end"].append(start + unzigzag(r["dur"]))
    rows["launch"].append(launch)
    rows["nccl"].append((r["flags"] & 1).astype(bool))
    rows["device"].append(r["device"].astype(np.int64) - 1)
    rows["stream"].append(r["stream"].astype(np.int64))


def step_intervals(w):
    t0 = w["start_ns"]
    for s in w.get("sections", []):
        if s["name"] == load_rank.step_section:
            occ = s.get("occurrences", {})
            yield from ((t0 + o, t0 + o + d) for o, d in zip(occ.get("start_offset_ns", []), occ.get("dur_ns", [])))


def load_frame_rank(data):
    """A binary frame file (rank*.lgr): like load_rank, the columns as numpy arrays."""
    rows = {c: [] for c in KERNEL_COLUMNS}
    steps, rank, seen = [], None, set()
    for header, w, block in frames(data):
        rank = header["rank"]
        if w["index"] in seen:
            continue
        seen.add(w["index"])
        steps += step_intervals(w)
        gpu = w.get("gpu")
        if gpu and block:
            add_binary_records(rows, rank, w["start_ns"], gpu.get("strings", []), block)
    return {c: (np.concatenate(v) if v else np.array([])) for c, v in rows.items()}, steps, rank


def load_rank(path):
    """One rank file: (kernel rows as a dict of lists or arrays, step intervals as [(start, end)], rank)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == FRAME_MAGIC:
        return load_frame_rank(data)
    doc = json.loads(data)
    rank = doc["rank"]
    rows = {c: [] for c in KERNEL_COLUMNS}
    steps = []
    for w in doc.get("windows", []):
        t0 = w["start_ns"]
        steps += step_intervals(w)
        gpu = w.get("gpu")
        if not gpu or "records" not in gpu:
            continue
        strings = gpu["strings"]
        r = gpu["records"]
        n = len(r["kind"])
        start = [t0 + x for x in r["start_offset_ns"]]
        rows["rank"] += [rank] * n
        rows["name"] += [strings[i] if i >= 0 else "" for i in r["name"]]
        rows["section"] += [strings[i] if i >= 0 else "(no section)" for i in r["section"]]
        rows["start"] += start
        rows["end"] += [s + d for s, d in zip(start, r["dur_ns"])]
        rows["launch"] += [t0 + a if d >= 0 else s for a, d, s in zip(r["api_start_offset_ns"], r["api_dur_ns"], start)]
        rows["nccl"] += [bool(f & 1) for f in r["flags"]]
        rows["device"] += r["device"]
        rows["stream"] += r["stream"]
    return rows, steps, rank


load_rank.step_section = "step"


def load_run(run_dir):
    """Every rank file under run_dir: one DataFrame of kernels and one of steps."""
    files = sorted(glob.glob(os.path.join(run_dir, "**", "rank*-seg*.json"), recursive=True) +
                   glob.glob(os.path.join(run_dir, "**", "rank*-seg*.lgr"), recursive=True))
    if not files:
        sys.exit(f"pandas_reference: no rank files under {run_dir}")
    cols = {c: [] for c in KERNEL_COLUMNS}
    step_rows = []
    for path in files:
        rows, steps, rank = load_rank(path)
        for c in KERNEL_COLUMNS:
            cols[c].append(np.asarray(rows[c], dtype=object if c in ("name", "section") else None))
        step_rows += [(rank, s, e) for s, e in steps]
    kernels = pd.DataFrame({c: np.concatenate(v) for c, v in cols.items()})
    for c in ("name", "section"):  # as a pandas user would: strings as categories
        kernels[c] = kernels[c].astype("category")
    steps = pd.DataFrame(step_rows, columns=["rank", "step_start", "step_end"])
    return kernels, steps


def kernel_statistics(kernels, steps):
    """The per-kernel cross-rank table: one row per (name, occurrence), sorted by position."""
    # Epoch ns (~1.8e18) lose precision as floats (a shift() with NaN makes one): from the run's start.
    base = min(kernels["start"].min(), kernels["launch"].min(), steps["step_start"].min())
    kernels = kernels.assign(start=kernels["start"] - base, end=kernels["end"] - base, launch=kernels["launch"] - base)
    steps = steps.assign(step_start=steps["step_start"] - base, step_end=steps["step_end"] - base)
    steps = steps.sort_values(["rank", "step_start"]).reset_index(drop=True)
    steps["step"] = steps.groupby("rank").cumcount()
    comparable = steps.groupby("rank")["step"].max().min() + 1  # steps every rank has
    steps = steps[steps["step"] < comparable]

    # Gap: idle time on the stream before each kernel (any activity on that stream counts).
    k = kernels.sort_values(["rank", "device", "stream", "start"], kind="stable")
    prev_end = k.groupby(["rank", "device", "stream"])["end"].shift()
    k = k.assign(dur=k["end"] - k["start"], gap=(k["start"] - prev_end).clip(lower=0).fillna(0))
    k.loc[k["nccl"], "gap"] = 0.0

    # Step of each kernel: the step whose host interval holds its launch.
    k = k.sort_values("launch", kind="stable")
    k = pd.merge_asof(k, steps.sort_values("step_start"), left_on="launch", right_on="step_start", by="rank")
    k = k[k["step"].notna() & (k["launch"] < k["step_end"])]
    k = k.sort_values(["rank", "step", "launch"], kind="stable")
    k["occurrence"] = k.groupby(["rank", "step", "name"], observed=True, sort=False).cumcount()
    k["pos"] = k.groupby(["rank", "step"], sort=False).cumcount()

    per_rank = k.groupby(["name", "occurrence", "rank"], observed=True).agg(
        dur=("dur", "mean"), gap=("gap", "mean"), pos=("pos", "mean"), section=("section", "last"),
        nccl=("nccl", "last")).reset_index()
    g = per_rank.groupby(["name", "occurrence"], observed=True)
    imin, imax, igap = g["dur"].idxmin(), g["dur"].idxmax(), g["gap"].idxmax()
    table = pd.DataFrame({
        "median_duration_ns": g["dur"].median(),
        "min_duration_ns": g["dur"].min(),
        "min_rank": per_rank.loc[imin, "rank"].values,
        "max_duration_ns": g["dur"].max(),
        "max_rank": per_rank.loc[imax, "rank"].values,
        "median_gap_ns": g["gap"].median(),
        "max_gap_ns": g["gap"].max(),
        "max_gap_rank": per_rank.loc[igap, "rank"].values,
        "position": np.floor(g["pos"].median() + 0.5).astype(int),  # std::lround for positions >= 0
        "section": g["section"].last(),
        "nccl": g["nccl"].last(),
    }).reset_index()
    table["name"] = table["name"].astype(str)
    return table.sort_values(["position", "name", "occurrence"], kind="stable").reset_index(drop=True)


def laggard_kernels(laggard, run_dir, step_section):
    cmd = [laggard, "report", run_dir, "--format", "json", "--step-section", step_section]
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall, r1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    jitter = json.loads(out)["jitter"]
    if not jitter.get("available"):
        sys.exit(f"pandas_reference: laggard's jitter analysis is not available: {jitter.get('why_not')}")
    return pd.DataFrame(jitter["kernels"]), wall, cpu


def compare(ours, theirs, rel=1e-6, abs_ms=1e-6):
    """Match laggard's rows to ours by (name, n-th position of that name); returns mismatches."""
    theirs = theirs.sort_values(["position"], kind="stable").copy()
    theirs["occurrence"] = theirs.groupby("name").cumcount()
    merged = theirs.merge(ours, on=["name", "occurrence"], how="outer", suffixes=("_laggard", "_pandas"),
                          indicator=True)
    problems = [f"only in {'laggard' if m == 'left_only' else 'pandas'}: {n}"
                for n, m in zip(merged["name"], merged["_merge"]) if m != "both"]
    both = merged[merged["_merge"] == "both"]
    for ms_col, ns_col in [("median_duration_ms", "median_duration_ns"), ("min_duration_ms", "min_duration_ns"),
                           ("max_duration_ms", "max_duration_ns"), ("median_gap_ms", "median_gap_ns"),
                           ("max_gap_ms", "max_gap_ns")]:
        a, b = both[ms_col].to_numpy(), both[ns_col].to_numpy() / 1e6
        bad = ~np.isclose(a, b, rtol=rel, atol=abs_ms)
        problems += [f"{n}: {ms_col} laggard {x} pandas {y}" for n, x, y in zip(both["name"][bad], a[bad], b[bad])]
    for col in ["min_rank", "max_rank", "max_gap_rank", "position_laggard"]:
        other = "position_pandas" if col == "position_laggard" else col + "_pandas"
        mine = col if col == "position_laggard" else col + "_laggard"
        bad = both[mine].to_numpy() != both[other].to_numpy()
        problems += [f"{n}: {col} differs" for n in both["name"][bad]]
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--laggard", default=os.path.join(os.path.dirname(__file__), "..", "build", "laggard"))
    ap.add_argument("--step-section", default="step")
    ap.add_argument("--show", type=int, default=5, help="rows of each table to print")
    args = ap.parse_args()
    load_rank.step_section = args.step_section

    # Wall and CPU time (user + sys) of each side: on a shared machine CPU time is the fairer one.
    t0, c0 = time.monotonic(), time.process_time()
    kernels, steps = load_run(args.run_dir)
    t_load, c_load = time.monotonic() - t0, time.process_time() - c0
    t1, c1 = time.monotonic(), time.process_time()
    ours = kernel_statistics(kernels, steps)
    t_stats, c_stats = time.monotonic() - t1, time.process_time() - c1
    theirs, t_laggard, c_laggard = laggard_kernels(args.laggard, args.run_dir, args.step_section)

    pd.set_option("display.width", 200)
    print(f"pandas: {len(kernels)} kernel records, {len(ours)} kernel positions")
    print(ours.head(args.show).to_string())
    print("laggard report --format json, jitter.kernels:")
    print(theirs.head(args.show).to_string())
    problems = compare(ours, theirs)
    for p in problems[:20]:
        print("MISMATCH", p)
    t_pandas = t_load + t_stats
    print(f"pandas: load {t_load:.2f} s + statistics {t_stats:.2f} s = {t_pandas:.2f} s; "
          f"laggard report (everything): {t_laggard:.2f} s; ratio pandas/laggard = {t_pandas / t_laggard:.1f}x "
          f"(statistics alone: {t_stats / t_laggard:.1f}x)")
    c_pandas = c_load + c_stats
    print(f"CPU time: pandas load {c_load:.2f} s + statistics {c_stats:.2f} s = {c_pandas:.2f} s; "
          f"laggard report: {c_laggard:.2f} s; ratio pandas/laggard = {c_pandas / c_laggard:.1f}x "
          f"(statistics alone: {c_stats / c_laggard:.1f}x); load average {os.getloadavg()[0]:.1f}")
    print("results agree" if not problems else f"{len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
