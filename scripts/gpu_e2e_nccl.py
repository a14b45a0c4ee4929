"""One rank of scripts/gpu-e2e-nccl: a synchronous data-parallel loop on one shared GPU.

Every rank computes, then all-reduces a gradient-sized tensor; SLOW_RANK sleeps SLOW_MS (CPU) and
runs extra matmuls before each all_reduce, so the others reach the collective first and wait in it.
Step times are then the same on all ranks; only the collectives show who everyone waited for.
Environment: RANK, WORLD_SIZE, LOCAL_RANK (torchrun), SLOW_RANK (default 2), SLOW_MS (default 30),
STEPS (default 60).
"""
import os
import time

rank = int(os.environ["RANK"])
# Several NCCL ranks may not share a GPU inside one "node"; distinct host ids make NCCL treat each
# rank as its own node and connect them over sockets. Set before NCCL initializes.
os.environ["NCCL_HOSTID"] = f"laggard-e2e-host{rank}"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

slow_rank = int(os.environ.get("SLOW_RANK", "2"))
slow_s = float(os.environ.get("SLOW_MS", "30")) / 1000
steps = int(os.environ.get("STEPS", "60"))

torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
world = dist.get_world_size()
grad = torch.ones(1 << 20, device="cuda")  # 4 MiB of fp32
a = torch.randn(1024, 1024, device="cuda")

for step in range(steps):
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_push("compute")
    y = a @ a
    if rank == slow_rank:
        time.sleep(slow_s)
        for _ in range(8):
            y = y @ a
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("all_reduce")
    dist.all_reduce(grad)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

expected = float(world) ** steps
print(f"rank {rank}: {steps} steps done, grad[0]={grad[0].item():.3g} (expected {expected:.3g})", flush=True)
# No destroy_process_group(): most jobs never destroy their communicators, and laggard must
# still write every collective at exit.
