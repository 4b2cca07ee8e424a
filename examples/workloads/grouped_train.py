#!/usr/bin/env python3
"""Ganglion example workload: hierarchical data parallelism over latency groups.

A job whose spec asks for `placement.groups` (G groups of N GPUs; every group's machines within
a tight RTT bound, the groups within a looser one) gets, besides torch's env:// rendezvous, its
latency group from the Ganglion executor:

  GANGLION_GROUP_ID     the container's group, 0-based
  GANGLION_GROUP_RANK   the container's first process's rank within its group (add LOCAL_RANK)
  GANGLION_GROUP_SIZE   ranks per group (N)
  GANGLION_GROUP_COUNT  groups (G)
Group g holds the global ranks g*N .. (g+1)*N - 1.

This script builds one torch process group per latency group (the chatty traffic stays on the
near links: model or pipeline parallelism would live there) and, for every rank within a group,
one group across the latency groups (the data-parallel replicas of that shard). It then trains a
small classifier where every step's gradients are summed first inside the group, then across the
groups, and checks that:
  - each group holds exactly the ranks the environment says (an all_gather inside the group);
  - the two-level sum equals one flat all_reduce over the whole world, bit for bit up to fp32
    rounding (the hierarchical reduction is right);
  - every rank ends with the same weights (checksum).

Environment: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK (torch env://), the
GANGLION_GROUP_* variables above, TRAIN_STEPS (default 40), DDP_TIMEOUT (s, default 120),
OUT_DIR (default /outputs).
Prints one line per rank: "[rank R] group=g/G group_rank=r/N checksum=<sha256[:16]> agree=True".
"""
import datetime
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

FEATURES, CLASSES = 8, 4


def env_int(name, default=None):
    value = os.environ.get(name)
    if value is None:
        if default is None:
            sys.exit(f"{name} is not set: run this as a job whose spec has placement.groups")
        return default
    return int(value)


def checksum(m):
    h = hashlib.sha256()
    for p in m.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    timeout = datetime.timedelta(seconds=env_int("DDP_TIMEOUT", 120))
    dist.init_process_group(backend, init_method="env://", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = env_int("LOCAL_RANK", 0)
    group = env_int("GANGLION_GROUP_ID")
    group_rank = env_int("GANGLION_GROUP_RANK") + local_rank
    size = env_int("GANGLION_GROUP_SIZE")
    groups = env_int("GANGLION_GROUP_COUNT")
    if groups * size != world or rank != group * size + group_rank:
        sys.exit(f"[rank {rank}] inconsistent groups: group {group} rank {group_rank} "
                 f"of {groups} x {size} in a world of {world}")
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")

    # Every rank creates every group, in the same order (torch requires it).
    inside = [dist.new_group(list(range(g * size, (g + 1) * size))) for g in range(groups)]
    across = [dist.new_group([g * size + r for g in range(groups)]) for r in range(size)]
    mine, replicas = inside[group], across[group_rank]

    members = [None] * size
    dist.all_gather_object(members, rank, group=mine)
    if members != list(range(group * size, (group + 1) * size)):
        sys.exit(f"[rank {rank}] group {group} holds {members}")

    g = torch.Generator().manual_seed(7)
    x = torch.randn(256 * world, FEATURES, generator=g)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 2.0
    y = torch.cdist(x, centers).argmin(dim=1)
    shard = slice(rank * 256, (rank + 1) * 256)
    xs, ys = x[shard].to(device), y[shard].to(device)

    torch.manual_seed(42)
    net = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.2)
    loss_fn = nn.CrossEntropyLoss()
    worst = 0.0
    for step in range(env_int("TRAIN_STEPS", 40)):
        opt.zero_grad()
        loss = loss_fn(net(xs), ys)
        loss.backward()
        for p in net.parameters():
            flat = p.grad.detach().clone()
            dist.all_reduce(flat, group=dist.group.WORLD)
            dist.all_reduce(p.grad, group=mine)       # near links first
            dist.all_reduce(p.grad, group=replicas)   # then across the groups
            worst = max(worst, (p.grad - flat).abs().max().item())
            p.grad /= world
        opt.step()
        if step % 10 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)

    exact = worst <= 1e-5
    digest = checksum(net)
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    agree = len(set(digests)) == 1 and exact
    print(f"[rank {rank}] group={group}/{groups} group_rank={group_rank}/{size} "
          f"hierarchical_error={worst:.2e} checksum={digest} agree={agree}", flush=True)
    out = os.environ.get("OUT_DIR", "/outputs")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
        json.dump({"rank": rank, "group": group, "group_rank": group_rank, "checksum": digest,
                   "hierarchical_error": worst, "all_agree": agree}, f, sort_keys=True)
    try:
        dist.barrier()
    except RuntimeError as e:
        # A peer that passed the barrier first may exit before this rank reads its last
        # message: the work is done and written.
        print(f"[rank {rank}] final barrier: {e}", flush=True)
    sys.stdout.flush()
    os._exit(0 if agree else 1)


if __name__ == "__main__":
    main()
