"""A small DDP training job with no laggard or NVTX marks in it (issue 25): DataLoader, forward,
loss, backward, SGD, on gloo. Run under torchrun; laggard's automatic sections must find the
slow rank on their own.

    --slow-rank R --slow loader|module --delay-ms D   rank R's data loader (collate) or one of
                                                      its modules sleeps D ms per step
    --device cuda --backend nccl                      on a GPU machine (scripts/gpu-e2e-torch); more
                                                      ranks than GPUs share them, each rank its own
                                                      NCCL_HOSTID (NCCL refuses two ranks of a
                                                      communicator on one GPU otherwise)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow", choices=["loader", "module"], default="loader")
p.add_argument("--delay-ms", type=float, default=40)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--device", default="cpu")
p.add_argument("--backend", default="gloo")
args = p.parse_args()

if args.device == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    if torch.cuda.device_count() < int(os.environ.get("WORLD_SIZE", "1")):
        os.environ.update(NCCL_HOSTID="host" + os.environ.get("RANK", "0"), NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
dist.init_process_group(args.backend)
rank = dist.get_rank()
slow = rank == args.slow_rank
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, slow_here):
        super().__init__()
        self.linear = nn.Linear(64, 64)
        self.slow_here = slow_here

    def forward(self, x):
        if self.slow_here:
            time.sleep(args.delay_ms / 1e3)
        return torch.relu(self.linear(x))


model = nn.Sequential(Block(False), Block(slow and args.slow == "module"), nn.Linear(64, 1)).to(args.device)
ddp = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
loss_fn = nn.MSELoss()


def collate(batch):
    if slow and args.slow == "loader":
        time.sleep(args.delay_ms / 1e3)
    return torch.utils.data.default_collate(batch)


data = torch.utils.data.TensorDataset(torch.randn(args.steps * args.batch, 64), torch.randn(args.steps * args.batch, 1))
loader = torch.utils.data.DataLoader(data, batch_size=args.batch, collate_fn=collate)
for x, y in loader:
    x, y = x.to(args.device), y.to(args.device)
    opt.zero_grad()
    loss = loss_fn(ddp(x), y)
    loss.backward()
    opt.step()
dist.barrier()
dist.destroy_process_group()
print("rank %d done" % rank, flush=True)
