#!/usr/bin/env python3
"""Ganglion example workload: data-parallel training with PyTorch DDP (CPU/gloo or GPU/nccl).

A small classifier learns a synthetic 4-class problem. Every rank reads its own shard through
DistributedSampler, DDP averages gradients, so all ranks end with identical weights. Each rank
writes /outputs/rank-<N>.json with its parameter checksum; rank 0 also writes the checkpoint
/outputs/model.pt (state_dict) that examples/workloads/infer.py consumes.

Environment (set by the Ganglion executor, or by torchrun):
  MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK   torch env:// rendezvous
  TRAIN_EPOCHS (default 3), TRAIN_SAMPLES (default 2048), OUT_DIR (default /outputs)
Prints one line per rank: "[rank R] checksum=<sha256[:16]> accuracy=<train accuracy>".
Exits hard after the final barrier (Debian's torch 1.13 can hang in gloo teardown).
"""
import datetime
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES, CLASSES = 8, 4


def dataset(samples):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(samples, FEATURES, generator=g)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 2.0
    y = torch.cdist(x, centers).argmin(dim=1)
    return TensorDataset(x, y)


def model():
    torch.manual_seed(42)
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))


def checksum(m):
    h = hashlib.sha256()
    for p in m.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=int(os.environ.get("DDP_TIMEOUT", "120"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    data = dataset(int(os.environ.get("TRAIN_SAMPLES", "2048")))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    net = model().to(device)
    ddp = DDP(net, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(int(os.environ.get("TRAIN_EPOCHS", "3"))):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(ddp(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
        print(f"[rank {rank}] epoch {epoch} loss {loss.item():.4f}", flush=True)

    with torch.no_grad():
        x, y = data.tensors
        accuracy = (net(x.to(device)).argmax(dim=1).cpu() == y).float().mean().item()
    digest = checksum(net)
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    agree = len(set(digests)) == 1
    print(f"[rank {rank}] checksum={digest} accuracy={accuracy:.3f} agree={agree}", flush=True)
    out = os.environ.get("OUT_DIR", "/outputs")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world_size": world, "checksum": digest,
                   "accuracy": accuracy, "all_agree": agree}, f, sort_keys=True)
    if rank == 0:
        torch.save(net.state_dict(), os.path.join(out, "model.pt"))
    try:
        dist.barrier()
    except RuntimeError as e:
        # A peer that passed the barrier first may exit (and close its gloo sockets) before
        # this rank reads its last message: the work is done and written, so that is no failure.
        print(f"[rank {rank}] final barrier: {e}", flush=True)
    sys.stdout.flush()
    os._exit(0 if agree else 1)


if __name__ == "__main__":
    main()
