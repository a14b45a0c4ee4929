#!/usr/bin/env python3
"""A kernel-dense PyTorch loop for bench/gpu-overhead: each step runs many small element-wise ops
and a few matmuls inside torch.cuda.nvtx ranges, then synchronizes. Prints the median step time.

    torch_dense.py [--mode plain|profiler] [--steps N] [--ops K] [--size N]

--mode profiler runs the timed loop inside torch.profiler.profile(CPU + CUDA activities), the
usual way to get kernel timings from PyTorch, for comparison with laggard's overhead.
"""
import argparse
import contextlib
import json
import statistics
import time

import torch
import torch.cuda.nvtx as nvtx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["plain", "profiler"], default="plain")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--size", type=int, default=1 << 20)
    a = p.parse_args()

    dev = torch.device("cuda", 0)
    x = torch.randn(a.size, device=dev)
    b = torch.randn(a.size, device=dev)
    m = torch.randn(512, 512, device=dev)

    def step():
        nonlocal x
        with nvtx.range("step"):
            with nvtx.range("elementwise"):
                for _ in range(a.ops):
                    x = x * 0.999 + b
            with nvtx.range("matmul"):
                y = m
                for _ in range(8):
                    y = y @ m
        torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    ctx = contextlib.nullcontext()
    if a.mode == "profiler":
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ctx = torch.profiler.profile(activities=acts)
    times = []
    with ctx:
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    print(json.dumps({"mode": a.mode, "ops": a.ops, "steps": a.steps,
                      "median_step_us": 1e6 * statistics.median(times),
                      "mean_step_us": 1e6 * statistics.fmean(times)}))


if __name__ == "__main__":
    main()
