#!/usr/bin/env python3
"""A PyTorch training loop with torch.profiler on a schedule, for scripts/gpu-e2e-profiler (issue 26).

Run it once alone (plain python) and once under `laggard run`: the profiler's counts must be the
same (laggard steps aside). torch.profiler.schedule(wait, warmup, active, repeat) as given by
--schedule W:U:A:R; on_trace_ready counts each cycle's events. --cpu-only profiles with
activities=[CPU] only (Kineto registers its CUPTI buffers but enables no kernel records: laggard
cannot record those steps and counts them). --ctl-pause-at S / --ctl-resume-at S run
`laggard ctl RUN_DIR pause|resume` (LAGGARD_CLI; RUN_DIR from LAGGARD_OUT and LAGGARD_RUN_ID, which
`laggard run` exports) before step S and wait for it. Prints one JSON line per rank:
{"rank", "steps", "cycles", "profiler_gpu_events", "profiler_cpu_events", "profiler_kernels",
 "cuda_launch_events"}.
"""
import argparse
import json
import os
import subprocess

import torch
import torch.cuda.nvtx as nvtx
from torch.autograd import DeviceType


def ctl(command):
    cli, out, run_id = os.environ.get("LAGGARD_CLI"), os.environ.get("LAGGARD_OUT"), os.environ.get("LAGGARD_RUN_ID")
    if not (cli and out and run_id):
        return  # alone: nothing to pause
    subprocess.run([cli, "ctl", os.path.join(out, run_id), command], check=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--schedule", default="1:1:2:20", help="W:U:A:R for torch.profiler.schedule")
    p.add_argument("--cpu-only", action="store_true")
    p.add_argument("--ctl-pause-at", type=int, default=-1)
    p.add_argument("--ctl-resume-at", type=int, default=-1)
    a = p.parse_args()
    wait, warmup, active, repeat = (int(v) for v in a.schedule.split(":"))

    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local if local < torch.cuda.device_count() else 0)
    torch.cuda.set_device(dev)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(128, a.width, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)
    torch.cuda.synchronize()

    counts = {"cycles": 0, "gpu": 0, "cpu": 0, "kernels": 0, "launches": 0}

    def on_trace_ready(prof):
        counts["cycles"] += 1
        for e in prof.events():
            if e.device_type == DeviceType.CUDA:
                counts["gpu"] += 1
                counts["kernels"] += 0 if e.name.startswith(("Memcpy", "Memset")) else 1
            else:
                counts["cpu"] += 1
                counts["launches"] += e.name.startswith(("cudaLaunchKernel", "cuLaunchKernel"))

    acts = [torch.profiler.ProfilerActivity.CPU]
    if not a.cpu_only:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
    with torch.profiler.profile(activities=acts, schedule=schedule, on_trace_ready=on_trace_ready) as prof:
        for step in range(a.steps):
            if step == a.ctl_pause_at:
                ctl("pause")
            if step == a.ctl_resume_at:
                ctl("resume")
            with nvtx.range("step"):
                with nvtx.range("forward"):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                with nvtx.range("backward"):
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                with nvtx.range("optimizer"):
                    opt.step()
                torch.cuda.synchronize()
            prof.step()
    print(json.dumps({"rank": rank, "steps": a.steps, "cycles": counts["cycles"], "profiler_gpu_events": counts["gpu"],
                      "profiler_cpu_events": counts["cpu"], "profiler_kernels": counts["kernels"],
                      "cuda_launch_events": counts["launches"]}))


if __name__ == "__main__":
    main()
