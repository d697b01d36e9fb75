"""Weighted against unweighted random walks (DeepWalk and node2vec) on a random graph.

Prints one line per walk kind: the device, the graph's size, walkers, steps, and the
median seconds of a few repeats. Usage::

    python benchmarks/bench_weighted_walks.py --device cuda --nodes 1000000 --edges 10000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from graphemb.graph import Graph
from graphemb.sampling.walks import RandomWalker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--walkers", type=int, default=100_000)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, args.nodes, (args.edges,), generator=gen)
    dst = torch.randint(0, args.nodes, (args.edges,), generator=gen)
    weight = torch.rand(args.edges, generator=gen, dtype=torch.float64) * 10
    graph = Graph.from_edges(src, dst, args.nodes, undirected=True, edge_weight=weight).to(device)
    start = torch.randint(0, args.nodes, (args.walkers,), generator=gen).to(device)
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device={name} threads={torch.get_num_threads()} loadavg={load} nodes={args.nodes} "
          f"stored_edges={graph.num_edges} walkers={args.walkers} steps={args.length}")  # fmt: skip
    for p, q in ((1.0, 1.0), (0.5, 2.0)):
        for weighted in (False, True):
            begin = time.perf_counter()
            walker = RandomWalker(graph, p, q, weighted=weighted)
            setup = time.perf_counter() - begin
            generator = torch.Generator(device=device).manual_seed(1)
            times = []
            for _ in range(args.repeats + 1):  # the first run warms up
                if device.type == "cuda":
                    torch.cuda.synchronize()
                begin = time.perf_counter()
                walker(start, args.length, generator=generator)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - begin)
            kind = "deepwalk" if p == q == 1.0 else f"node2vec(p={p},q={q})"
            print(f"{kind:22s} weighted={weighted!s:5s} setup_s={setup:.3f} "
                  f"walks_s={statistics.median(times[1:]):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
