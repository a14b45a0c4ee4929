"""The loop of bench/torch-sections: a training step over a tiny model (MODULES Linear+ReLU pairs,
batch 4), short enough that laggard's automatic sections are a visible part of it.

    torch_step_cost.py ab [--steps N] [--modules M]
        Run with liblaggard.so preloaded and LAGGARD_TORCH=0 (torch imported as it is): installs
        the automatic sections itself, then times blocks of steps with torch's original entry
        points and with laggard's wrappers in turn, in one process, so that both see the same
        machine. Twice: a plain model, and a DDP model (world size 1 on gloo) without and with
        laggard's communication hook. Prints per variant the median over blocks of the training
        thread's CPU time per step, in µs (a process waiting for a core gets no CPU time: what a
        loaded machine disturbs least), and the whole process' (laggard's flush thread included).

    torch_step_cost.py loop [--steps N] [--modules M] [--setprofile]
        One plain loop as the process finds it (with or without laggard); prints the median
        training-thread CPU µs per step. --setprofile: under a sys.setprofile function that does
        nothing, the design laggard did not take.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["ab", "loop"])
p.add_argument("--steps", type=int, default=200, help="steps per block")
p.add_argument("--blocks", type=int, default=30, help="blocks per variant")
p.add_argument("--modules", type=int, default=4)
p.add_argument("--setprofile", action="store_true")
args = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
data = torch.utils.data.TensorDataset(torch.randn(args.steps * 4, 16), torch.randn(args.steps * 4, 1))
loss_fn = nn.MSELoss()


def make(ddp):
    layers = []
    for _ in range(args.modules):
        layers += [nn.Linear(16, 16), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    return nn.parallel.DistributedDataParallel(model) if ddp else model


def block(model, opt):
    """One block of steps: (training thread CPU s, process CPU s) per step."""
    it = iter(torch.utils.data.DataLoader(data, batch_size=4))
    m0, c0 = time.thread_time(), time.process_time()
    for _ in range(args.steps):
        x, y = next(it)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return (time.thread_time() - m0) / args.steps, (time.process_time() - c0) / args.steps


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


if args.mode == "loop":
    model = make(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    if args.setprofile:
        sys.setprofile(lambda frame, event, arg: None)
    for _ in range(3):
        block(model, opt)  # warm-up
    print("%.2f" % (1e6 * median(block(model, opt)[0] for _ in range(args.blocks))))
    sys.exit(0)

# ab: torch's entry points, then laggard's, swapped block by block.
import torch.utils.data.dataloader as dl  # noqa: E402

Module, Optimizer, Iter = torch.nn.Module, torch.optim.Optimizer, dl._BaseDataLoaderIter
plain_model, plain_ddp = make(False), make(True)
plain_opts = [torch.optim.SGD(m.parameters(), lr=0.001) for m in (plain_model, plain_ddp)]
original = (Module.__call__, Iter.__next__, torch.autograd.backward, torch.optim.SGD.step)
import laggard_torch  # noqa: E402  (on PYTHONPATH: bench/torch-sections puts build/python there)

assert laggard_torch.install(torch), "laggard's automatic sections could not be installed"
laggard_model, laggard_ddp = make(False), make(True)  # made after install: SGD's step is wrapped at its first optimizer
laggard_opts = [torch.optim.SGD(m.parameters(), lr=0.001) for m in (laggard_model, laggard_ddp)]
wrapped = (Module.__call__, Iter.__next__, torch.autograd.backward, torch.optim.SGD.step)


def use(entry_points):
    Module.__call__, Iter.__next__, torch.autograd.backward, torch.optim.SGD.step = entry_points


variants = {"plain": [], "plain+sections": [], "ddp": [], "ddp+sections": []}
runs = [("plain", original, plain_model, plain_opts[0]), ("plain+sections", wrapped, laggard_model, laggard_opts[0]),
        ("ddp", original, plain_ddp, plain_opts[1]), ("ddp+sections", wrapped, laggard_ddp, laggard_opts[1])]
for _, entry, model, opt in runs:  # warm-up; laggard's DDP model registers its hook at its first forward
    use(entry)
    for _ in range(3):
        block(model, opt)
for _ in range(args.blocks):
    for name, entry, model, opt in runs:
        use(entry)
        variants[name].append(block(model, opt))
for name, v in variants.items():
    print("%s %.2f %.2f" % (name, 1e6 * median(t for t, _ in v), 1e6 * median(c for _, c in v)))
