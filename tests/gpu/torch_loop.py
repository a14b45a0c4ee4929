#!/usr/bin/env python3
"""A short PyTorch training loop marked with torch.cuda.nvtx, for scripts/gpu-e2e-torch.

Each rank (RANK from `laggard run --nproc N`) trains a small MLP on GPU 0 (or LOCAL_RANK when
there are enough GPUs). With --ddp the ranks all-reduce their gradients over NCCL inside an
"allreduce" range (several ranks on one GPU: see /work/shared/notes/gpu-machine.md; the wrapper
script sets NCCL_HOSTID per rank). --slow-rank R makes rank R do extra matmuls in "forward".
Prints one JSON line per rank with the step count and median step time.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.cuda.nvtx as nvtx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-extra", type=int, default=8, help="extra matmuls per step on the slow rank")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--profiler-steps", default="",
                   help="A:B: run torch.profiler (CPU+CUDA) from step A to step B, then go on without it")
    a = p.parse_args()
    prof_from, prof_to = (int(v) for v in a.profiler_steps.split(":")) if a.profiler_steps else (-1, -1)
    prof, prof_kernels = None, None

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local if local < torch.cuda.device_count() else 0)
    torch.cuda.set_device(dev)
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)

    model = torch.nn.Sequential(
        torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
        torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
        torch.nn.Linear(a.width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, a.width, device=dev)
    y = torch.randint(0, 10, (256,), device=dev)
    extra = torch.randn(a.width, a.width, device=dev)

    times = []
    for step in range(a.steps):
        if step == prof_from:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            prof = torch.profiler.profile(activities=acts)
            prof.start()  # Kineto: its own CUPTI activity buffers, kinds on (laggard starves meanwhile)
        if step == prof_to and prof is not None:
            prof.stop()   # Kineto: flush, kinds off (laggard takes the activity API back)
            prof_kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        t0 = time.perf_counter()
        with nvtx.range("step"):
            with nvtx.range("forward"):
                out = model(x)
                loss = torch.nn.functional.cross_entropy(out, y)
                if rank == a.slow_rank:
                    z = extra
                    for _ in range(a.slow_extra):
                        z = torch.tanh(z @ extra)
                    loss = loss + 0 * z.sum()
            with nvtx.range("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            if a.ddp:
                with nvtx.range("allreduce"):
                    for prm in model.parameters():
                        dist.all_reduce(prm.grad)
            with nvtx.range("optimizer"):
                opt.step()
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if a.ddp:
        dist.destroy_process_group()
    line = {"rank": rank, "steps": a.steps, "median_step_ms": 1e3 * statistics.median(times[5:] or times)}
    if prof_kernels is not None:
        line["profiler_gpu_events"] = prof_kernels
    print(json.dumps(line))


if __name__ == "__main__":
    main()
