"""Writes the traces torch.profiler makes when PyTorch has no Kineto (Debian's 1.13: a bare JSON
array), for three "ranks" in one process, for tests/integration/torch_test.cpp to import: each
profiles 12 steps of a tiny loop whose record_function("data_load") takes 3 ms, 40 ms on rank 1,
and its "compute" 8 ms.

    legacy_traces.py OUT_DIR
"""
import os
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

out = sys.argv[1]
assert not torch.autograd.kineto_available() or os.environ.get("LEGACY_ANYWAY"), "this PyTorch writes Kineto traces"
model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for rank in range(3):
    def ready(p, rank=rank):
        p.export_chrome_trace(os.path.join(out, "trace_rank%d.json" % rank))

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=12, repeat=1),
                 on_trace_ready=ready) as prof:
        for step in range(14):
            with record_function("data_load"):
                time.sleep(0.040 if rank == 1 else 0.003)
                x = torch.randn(8, 16)
            with record_function("compute"):
                time.sleep(0.008)
                loss = model(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
print("legacy traces written")
