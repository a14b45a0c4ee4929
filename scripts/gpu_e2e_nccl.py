"""One rank of scripts/gpu-e2e-nccl: a synchronous job on one shared GPU, in one of four modes.

MODE (default allreduce):
  allreduce  every rank computes, then all-reduces a gradient-sized tensor;
  grouped    a ReduceScatter and an AllGather coalesced in one ncclGroupStart/End (one kernel), as
             FSDP and ZeRO do (issue 27: matched as one arrival per rank);
  broadcast  the allreduce loop, plus every BCAST_EVERY steps two Broadcasts from ranks 0 and 1 in one
             group (issue 27: on NCCL 2.29+ they shift the communicator's kernel work counter, so the
             report falls back to enqueue times there; on 2.28 they are ordinary collectives);
  pipeline   pipeline parallelism: rank s receives from s-1, computes, sends to s+1, per microbatch.
SLOW_RANK sleeps SLOW_MS (CPU) and runs extra matmuls before each collective (each send in pipeline
mode), so the others reach it first and wait. Step times are then the same on all ranks; only the
collectives show who everyone waited for.
Environment: RANK, WORLD_SIZE, LOCAL_RANK (torchrun), MODE, SLOW_RANK (default 2), SLOW_MS (default 30),
STEPS (default 60), BCAST_EVERY (default 10).
"""
import os
import time

rank = int(os.environ["RANK"])
# Several NCCL ranks may not share a GPU inside one "node"; distinct host ids make NCCL treat each
# rank as its own node and connect them over sockets. Set before NCCL initializes.
os.environ["NCCL_HOSTID"] = f"laggard-e2e-host{rank}"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

mode = os.environ.get("MODE", "allreduce")
slow_rank = int(os.environ.get("SLOW_RANK", "2"))
slow_s = float(os.environ.get("SLOW_MS", "30")) / 1000
steps = int(os.environ.get("STEPS", "60"))
bcast_every = int(os.environ.get("BCAST_EVERY", "10"))

device = torch.device("cuda:0")
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=device)
world = dist.get_world_size()
grad = torch.ones(1 << 20, device="cuda")  # 4 MiB of fp32
shard = torch.empty((1 << 20) // world, device="cuda")
a = torch.randn(1024, 1024, device="cuda")
acts = torch.zeros(1 << 18, device="cuda")
params = [torch.full((4096,), float(r), device="cuda") for r in range(2)]


def compute():
    y = a @ a
    if rank == slow_rank:
        time.sleep(slow_s)
        for _ in range(8):
            y = y @ a
    return y


def data_parallel_step(step):
    torch.cuda.nvtx.range_push("compute")
    compute()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("collectives")
    if mode == "grouped":
        # One ncclGroupStart/End (the manager's generic path, async_ops=False: any mix of ops): a
        # ReduceScatter and an AllGather in one kernel.
        with dist._coalescing_manager(device=device):
            dist.reduce_scatter_tensor(shard, grad)
            dist.all_gather_into_tensor(grad, shard)
    else:
        dist.all_reduce(grad)
    if mode == "broadcast" and step % bcast_every == bcast_every - 1 and world >= 2:
        with dist._coalescing_manager(device=device):
            for root in range(2):  # two roots in one group
                dist.broadcast(params[root], src=root)
    torch.cuda.nvtx.range_pop()


def pipeline_step():
    if rank > 0:
        dist.recv(acts, src=rank - 1)
    torch.cuda.nvtx.range_push("compute")
    compute()
    torch.cuda.nvtx.range_pop()
    if rank < world - 1:
        dist.send(acts, dst=rank + 1)


for step in range(steps):
    torch.cuda.nvtx.range_push("step")
    if mode == "pipeline":
        pipeline_step()
    else:
        data_parallel_step(step)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

print(f"rank {rank}: {mode}: {steps} steps done, grad[0]={grad[0].item():.3g}", flush=True)
# No destroy_process_group(): most jobs never destroy their communicators, and laggard must
# still write every collective at exit.
