"""Edge cases of laggard's automatic PyTorch sections (issue 25), in one process (world size 1,
gloo), run under liblaggard.so by tests/integration/torch_test.cpp. Every check here is about the
program: laggard must not change what it computes, which hooks run, or what raises. The test then
reads the sections laggard recorded from the rank file.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

assert getattr(torch.nn.Module.__call__, "_laggard", False), "laggard's automatic sections are not installed"
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
x, y = torch.randn(8, 4), torch.randn(8, 1)


def make():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))


def grads_after(model, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


reference = grads_after(make())

# DDP with laggard's own hook (DDP's default all-reduce, timed): the same result.
same = grads_after(nn.parallel.DistributedDataParallel(make()))
assert all(torch.allclose(a, b) for a, b in zip(reference, same)), "DDP's result changed"

# The program's hook, registered before the first forward: it runs, timed.
calls = []


def counting_hook(state, bucket):
    calls.append(1)
    return default_hooks.allreduce_hook(state, bucket)


ddp = nn.parallel.DistributedDataParallel(make())
ddp.register_comm_hook(None, counting_hook)
grads_after(ddp)
assert len(calls) == 3, calls

# ... after the first forward (laggard's hook is in place by then): it takes over from step 2.
calls.clear()
ddp = nn.parallel.DistributedDataParallel(make())
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
nn.functional.mse_loss(ddp(x), y).backward()
opt.step()
ddp.register_comm_hook(None, counting_hook)
after = grads_after(ddp, 2)
assert len(calls) == 2, calls
try:
    ddp.register_comm_hook(None, lambda s: None)  # a bad hook is still refused, as without laggard
    raise SystemExit("a hook with one parameter was accepted")
except KeyError:  # torch 1.13's _check_comm_hook looks its "bucket" parameter up
    pass

# A built-in hook after the first forward: its Python equivalent runs instead, same result.
ddp = nn.parallel.DistributedDataParallel(make())
nn.functional.mse_loss(ddp(x), y).backward()
ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
grads_after(ddp, 2)

# Collectives: a new group, async, barrier.
pg = dist.new_group([0])
t = torch.ones(3)
dist.all_reduce(t, group=pg)
work = dist.all_reduce(t, async_op=True)
work.wait()
dist.broadcast(t, src=0)
dist.barrier()
assert torch.equal(t, torch.ones(3))

# torch.cuda.nvtx on a CPU build: reaches laggard instead of raising.
torch.cuda.nvtx.range_push("user_range")
torch.cuda.nvtx.mark("user_mark")
torch.cuda.nvtx.range_pop()
rid = torch.cuda.nvtx.range_start("user_start_end")
torch.cuda.nvtx.range_end(rid)
with torch.cuda.nvtx.range("user_ctx"):
    pass
with torch.autograd.profiler.emit_nvtx():
    torch.ones(2) * 2


# An exception inside a forward goes to the program; the next steps are recorded as before.
class Boom(nn.Module):
    def forward(self, x):
        raise KeyError("boom")


try:
    Boom()(x)
    raise SystemExit("the exception was swallowed")
except KeyError:
    pass
grads_after(make(), 2)

dist.destroy_process_group()
print("hooks_and_nvtx ok")
