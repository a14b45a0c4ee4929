"""One rank of scripts/gpu-e2e-hang: a few all_reduce steps on one shared GPU, then SLOW_RANK sleeps
SLEEP_S seconds inside the NVTX section "data_load" (in slow_data_load()) before its next all_reduce, while
the other ranks enter the all_reduce and wait in it (torch.cuda.synchronize inside "all_reduce").
Environment: RANK (torchrun), SLOW_RANK (default 1), SLEEP_S (default 20), STEPS (default 5).
"""
import os
import time

rank = int(os.environ["RANK"])
os.environ["NCCL_HOSTID"] = f"laggard-hang-host{rank}"  # one "node" per rank: sockets on lo

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

slow_rank = int(os.environ.get("SLOW_RANK", "1"))
sleep_s = float(os.environ.get("SLEEP_S", "20"))
steps = int(os.environ.get("STEPS", "5"))

torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
grad = torch.ones(1 << 20, device="cuda")


def slow_data_load():
    time.sleep(sleep_s)


def step(i, stall):
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_push("data_load")
    if stall and rank == slow_rank:
        slow_data_load()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("all_reduce")
    dist.all_reduce(grad)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()


for i in range(steps):
    step(i, stall=False)
step(steps, stall=True)
dist.destroy_process_group()
print(f"rank {rank}: done", flush=True)
