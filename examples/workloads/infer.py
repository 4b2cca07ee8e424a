#!/usr/bin/env python3
"""Ganglion example workload: batch inference with a checkpoint given as an input CID.

Reads the state_dict at $MODEL (default /inputs/model.pt, as written by ddp_train.py), scores
the synthetic evaluation set, and writes /outputs/predictions.json (one class per sample) and
/outputs/metrics.json. With several containers (GANGLION_NNODES > 1) each one scores its own
contiguous shard, chosen by GANGLION_NODE_RANK; no collectives are needed.
Prints "accuracy=<value> samples=<n>".
"""
import json
import os

import torch
import torch.nn as nn

FEATURES, CLASSES = 8, 4


def model():
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))


def main():
    net = model()
    net.load_state_dict(torch.load(os.environ.get("MODEL", "/inputs/model.pt"), map_location="cpu"))
    net.eval()
    g = torch.Generator().manual_seed(7)          # same task as ddp_train.py
    x = torch.randn(int(os.environ.get("EVAL_SAMPLES", "1024")), FEATURES, generator=g)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 2.0
    y = torch.cdist(x, centers).argmin(dim=1)
    rank = int(os.environ.get("GANGLION_NODE_RANK", "0"))
    nodes = int(os.environ.get("GANGLION_NNODES", "1"))
    shard = slice(rank * len(x) // nodes, (rank + 1) * len(x) // nodes)
    with torch.no_grad():
        pred = net(x[shard]).argmax(dim=1)
    accuracy = (pred == y[shard]).float().mean().item()
    out = os.environ.get("OUT_DIR", "/outputs")
    with open(os.path.join(out, "predictions.json"), "w") as f:
        json.dump(pred.tolist(), f)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"accuracy": accuracy, "samples": len(pred), "shard": rank}, f, sort_keys=True)
    print(f"accuracy={accuracy:.3f} samples={len(pred)}", flush=True)


if __name__ == "__main__":
    main()
