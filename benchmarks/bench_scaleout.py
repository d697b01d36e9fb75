#!/usr/bin/env python
"""Scale-out: machine-aware (hierarchical) storage against fully partitioned, with overlap.

2 "machines" x 2 gloo ranks on this host (machines given explicitly: ranks 0, 1 and 2, 3),
SparseAdam, float32; per step every rank looks up its share of the batch, runs the loss and
backward, a fixed block of dense work (--dense-matmuls float32 512x512 products: stands
for the dense layers' all-reduce wait and the next batch's sampling) and the step:

  partitioned        NodeEmbedding(partition=Partition.remainder(N, 4)): every rank holds
                     its rows; lookups pull, steps push, from every other rank;
  hierarchical       NodeEmbedding(machines=[0, 0, 1, 1]): one shared copy per machine,
                     rows partitioned across machines, peers carry the traffic;
  hierarchical+ovl   the same with overlap=True: the gradient push starts at the end of
                     backward and runs during the dense work; the next batch's lookup is
                     routed (prefetch) during it too.

Measured:
* bytes sent across machines per step (the ids and rows of every exchange whose destination
  is on the other machine, as counted by graphemb's Exchange.bytes_sent), against the
  minimum: (unique rows each machine needs from the other) x row size, for the pulled rows
  and again for the pushed gradient rows; and hierarchical / partitioned;
* step times (interleaved rounds; the slowest rank counts) and ratios;
* the share of exchange time hidden: 1 - (time the overlapped step waits for exchanges) /
  (time the synchronous hierarchical step spends in them), both timed on the main thread.

--ids chooses what a rank looks up:
  uniform   its share of a global batch of uniform random ids;
  skewed    the same with ids floor(N * u^3) (hot low ids);
  graph     the input nodes of a GraphSAGE mini-batch: the 3-hop neighbourhood (fanouts 15, 10,
            5) of batch / 40 seeds per rank, sampled on an undirected power-law graph with N
            nodes and average degree 20 (Chung-Lu) -- the workload where ranks of one machine
            need many of the same rows (hubs), and deduplicating per machine pays.
Whatever ranks of one machine both need, the minimum counts once: unless they share rows,
no layout can send fewer bytes than fully partitioned storage already does.
The last line is "BENCH_SUMMARY {json}".
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from harness import cli, report, timing, workload
from harness.peers import Contender
from harness.ranks import RankPool

MACHINES = [0, 0, 1, 1]
WORLD = len(MACHINES)
SIZES = {
    "default": {**cli.SIZES["default"], "num_embeddings": 200_000, "dim": 64, "batch": 40_000},
    "quick": {**cli.SIZES["quick"], "num_embeddings": 20_000, "dim": 16, "batch": 4_000},
}
CONTENDERS = ("partitioned", "hierarchical", "hierarchical+ovl")
MEASURED_STEPS = 8


def parse_args(argv=None):
    doc = __doc__ or ""
    parser = cli.base_parser(doc.split("\n\n")[0], epilog=doc.split("\n\n", 1)[1], sizes=SIZES)
    parser.add_argument("--ids", choices=("uniform", "skewed", "graph"), default="uniform")
    parser.add_argument(
        "--dense-matmuls", type=int, default=None, help="dense work per step (default 6; quick 1)"
    )
    args = cli.finish_args(parser.parse_args(argv), SIZES)
    if args.dense_matmuls is None:
        args.dense_matmuls = 1 if args.quick else 6
    return args


def global_batches(spec: dict) -> list[torch.Tensor]:
    n, b = spec["num_embeddings"], spec["batch"]
    if spec["ids"] == "uniform":
        return workload.make_batches(n, b, 8, spec["seed"])
    gen = torch.Generator().manual_seed(spec["seed"])
    return [(torch.rand(b, generator=gen) ** 3 * n).long().clamp_(max=n - 1) for _ in range(8)]


def rank_batches(spec: dict, rank: int) -> list[torch.Tensor]:
    if spec["ids"] == "graph":
        return sampled_input_nodes(spec, rank)
    return [workload.rank_slice(b, rank, WORLD) for b in global_batches(spec)]


def power_law_graph(num_nodes: int, seed: int):
    """Undirected Chung-Lu graph: endpoint weights (k + 1) ** -0.8, average degree 20."""
    from graphemb.graph import Graph

    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, num_nodes + 1, dtype=torch.float64).pow(-0.8)
    cdf = torch.cumsum(weights, 0)
    cdf /= cdf[-1].clone()
    num_edges = 10 * num_nodes
    ends = [
        torch.searchsorted(cdf, torch.rand(num_edges, generator=gen, dtype=torch.float64)).clamp_(
            max=num_nodes - 1
        )
        for _ in range(2)
    ]
    relabel = torch.randperm(num_nodes, generator=gen)  # hubs anywhere, not at low ids
    a, b = relabel[ends[0]], relabel[ends[1]]
    return Graph.from_edges(torch.cat([a, b]), torch.cat([b, a]), num_nodes=num_nodes)


def sampled_input_nodes(spec: dict, rank: int) -> list[torch.Tensor]:
    """8 mini-batches of this rank: input nodes of 3-hop neighbourhoods of its seeds."""
    from graphemb.sampling import NeighborSampler

    n = spec["num_embeddings"]
    graph = power_law_graph(n, spec["seed"])
    sampler = NeighborSampler([15, 10, 5])
    seeds_per_rank = max(1, spec["batch"] // (WORLD * 40))
    gen = torch.Generator().manual_seed(spec["seed"] + 1)
    batches = []
    for step in range(8):
        seeds = torch.randperm(n, generator=gen)[: WORLD * seeds_per_rank]
        mine = workload.rank_slice(seeds, rank, WORLD)
        draws = torch.Generator().manual_seed(1000 * step + rank)
        batches.append(sampler.sample_blocks(graph, mine, generator=draws)[0])
    return batches


# ================================================================================== ranks
def build(rank: int, world_size: int, spec: dict) -> dict:
    """On each rank: the three contenders, then the bytes and exchange-time measurement."""
    from graphemb import NodeEmbedding, Partition
    from graphemb.optim import SparseAdam

    n, d = spec["num_embeddings"], spec["dim"]
    batches = rank_batches(spec, rank)
    loss = workload.make_loss(spec["loss"], d)
    dense = torch.randn(512, 512, generator=torch.Generator().manual_seed(rank))

    def dense_work() -> None:
        out = dense
        for _ in range(spec["dense_matmuls"]):
            out = torch.mm(out, dense).mul_(1e-3)

    contenders, embeddings = {}, {}
    for name in CONTENDERS:
        emb = NodeEmbedding(
            n,
            d,
            f"{spec['token']}-{name.replace('+', '-')}",  # the same name on every rank
            init_func=lambda t: t.uniform_(-0.1, 0.1),
            partition=Partition.remainder(n, WORLD) if name == "partitioned" else None,
            machines=None if name == "partitioned" else MACHINES,
            overlap=name.endswith("ovl"),
        )
        opt = SparseAdam([emb], lr=0.01)
        overlap = emb.storage.overlaps

        counter = [0]  # batches in a fixed sequence: prefetched ids must be the next ones

        def step(i: int, emb=emb, opt=opt, overlap=overlap, counter=counter) -> None:
            k = counter[0]
            counter[0] += 1
            if overlap and k == 0:  # the very first lookup was not routed ahead
                emb.prefetch(batches[0])
            rows = emb(batches[k % len(batches)])
            loss(rows).backward()
            if overlap:  # route the next lookup while the dense work runs
                emb.prefetch(batches[(k + 1) % len(batches)])
            dense_work()
            opt.step()

        contenders[name] = Contender(name, "graphemb", "adam", batches[0].numel(), step, step)
        contenders[name].objects += [emb, opt]
        embeddings[name] = emb
    measured = {name: measure(contenders[name], embeddings[name]) for name in CONTENDERS}
    Path(spec["out"], f"rank{rank}.json").write_text(json.dumps(measured))
    return contenders


def measure(contender: Contender, emb) -> dict:
    """Bytes to the other machine and main-thread exchange time over a few steps."""
    import torch.distributed as dist

    storage, me = emb.storage, dist.get_rank()
    counters: dict = defaultdict(float)

    def bytes_across() -> int:
        if storage.kind == "hierarchical":
            return storage.bytes_across_machines()
        sent = storage.exchange.bytes_sent  # partitioned: one group of every rank
        return sum(n for dest, n in enumerate(sent) if MACHINES[dest] != MACHINES[me])

    def timed(obj, attribute: str) -> None:
        method = getattr(obj, attribute)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                counters["exchange_s"] += time.perf_counter() - start

        setattr(obj, attribute, wrapper)

    if storage.overlaps:  # waits of the main thread only
        timed(storage, "read_prefetched")
        timed(emb, "_pushed_gradients")
    else:
        timed(storage, "read_rows")
        timed(storage, "push")
    exchange_s = []  # per step: one slow step (a descheduled rank) must not decide it
    try:
        contender.step(0)  # warm-up: mailboxes, buffers
        before = bytes_across()
        for i in range(1, 1 + MEASURED_STEPS):
            counters["exchange_s"] = 0.0
            contender.step(i)
            exchange_s.append(counters["exchange_s"])
        sent = bytes_across() - before
    finally:
        for attribute in ("read_prefetched", "read_rows", "push"):
            storage.__dict__.pop(attribute, None)
        emb.__dict__.pop("_pushed_gradients", None)
    return {"bytes": sent / MEASURED_STEPS, "exchange_s": exchange_s}


# ================================================================================== parent
def minimum_bytes(spec: dict) -> float:
    """Per step: rows each machine needs from the other machine, once, pulled and pushed."""
    d = spec["dim"]
    total = 0.0
    per_rank = [rank_batches(spec, r) for r in range(WORLD)]
    for step in range(1, 1 + MEASURED_STEPS):
        for machine in set(MACHINES):
            ids = torch.cat(
                [per_rank[r][step % 8] for r in range(WORLD) if MACHINES[r] == machine]
            ).unique()
            owner_machine = torch.tensor(MACHINES)[ids % WORLD]
            remote = int((owner_machine != machine).sum())
            total += 2 * remote * d * 4  # float32 rows pulled and gradient rows pushed
    return total / MEASURED_STEPS


def time_ranks(args) -> tuple[dict, list, dict]:
    """The ranks' contenders timed in interleaved rounds: ``(spec, what each rank measured,
    times)``."""
    out = tempfile.mkdtemp(prefix="bench-scaleout-")
    spec = workload.rank_spec(
        args,
        ids=args.ids,
        dense_matmuls=args.dense_matmuls,
        out=out,
        token=workload.unique_name("scaleout"),
    )
    with RankPool(build, WORLD, spec) as pool:
        measured = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(WORLD)]
        runners = {name: pool.runner(name) for name in CONTENDERS}
        times = timing.interleaved(
            runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds
        )
    for r in range(WORLD):
        os.unlink(Path(out, f"rank{r}.json"))
    os.rmdir(out)
    return spec, measured, times


def print_traffic(args, cross: dict, minimum: float) -> float:
    """The bytes each storage sends across machines against the minimum and partitioned,
    printed; the minimum as a fraction of partitioned's."""
    traffic_ratio = cross["hierarchical"] / cross["partitioned"]
    print("\nBytes sent across machines per step (all ranks; ids + rows)")
    report.print_table(
        ["storage", "MB/step", "vs minimum", "vs partitioned"],
        [
            [n, f"{cross[n] / 1e6:.2f}", f"{cross[n] / minimum:.2f}x",
             f"{cross[n] / cross['partitioned']:.2f}"]
            for n in cross
        ],
    )  # fmt: skip
    floor = minimum / cross["partitioned"]
    print(
        f"minimum (unique remote rows of each machine x {4 * args.dim} B, pulled and pushed): "
        f"{minimum / 1e6:.2f} MB/step = {floor:.2f} of partitioned (no layout sends less)\n"
        f"hierarchical / partitioned = {traffic_ratio:.2f} "
        f"({report.verdict(traffic_ratio, 0.5, at_most=True, unit='')}"
        f"{'' if floor <= 0.5 else f'; unreachable here: the minimum is {floor:.2f}'})"
    )
    return floor


def main(argv=None) -> dict:
    args = parse_args(argv)
    cli.apply_allocator(args)  # before the first tensor, for every contender
    cli.set_threads(1)
    report.print_header(
        "bench_scaleout: 2 machines x 2 ranks, hierarchical vs partitioned storage",
        args,
        extra=f" | ids {args.ids} | dense work {args.dense_matmuls} matmuls 512^3 per step",
    )
    spec, measured, times = time_ranks(args)

    minimum = minimum_bytes(spec)
    cross = {n: sum(m[n]["bytes"] for m in measured) for n in CONTENDERS}
    # Per step the slowest rank's exchange time; then the median over the steps.
    exchange = {
        n: timing.median(list(map(max, zip(*(m[n]["exchange_s"] for m in measured), strict=True))))
        for n in CONTENDERS
    }
    hidden = 1 - exchange["hierarchical+ovl"] / exchange["hierarchical"]

    floor = print_traffic(args, cross, minimum)
    print("\nStep times (slowest rank per step) and ratios against partitioned")
    rows = []
    for name in CONTENDERS:
        s = timing.stats_ms(timing.flat(times[name]))
        ratio = timing.round_ratios(times["partitioned"], times[name])
        rows.append([name, f"{s['median_ms']:.1f}", f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}",
                     timing.fmt_ratio(ratio), f"{1e3 * exchange[name]:.1f}"])  # fmt: skip
    report.print_table(
        ["contender", "ms/step", "p10-p90", "speed-up vs partitioned", "exchange ms (main)"], rows
    )
    print(
        f"exchange time hidden by overlap: {100 * hidden:.0f}% "
        f"({report.verdict(100 * hidden, 50, unit='%')})"
    )
    summary = {
        "bytes_across_machines_per_step": cross,
        "row_bytes": 4 * args.dim,
        "minimum_bytes_per_step": minimum,
        "minimum_vs_partitioned_traffic": floor,
        "hierarchical_vs_partitioned_traffic": cross["hierarchical"] / cross["partitioned"],
        "exchange_s_main_thread": exchange,
        "hidden_share": hidden,
        "step_ms": {n: timing.stats_ms(timing.flat(times[n])) for n in CONTENDERS},
        "speedup_vs_partitioned": {
            n: timing.round_ratios(times["partitioned"], times[n]) for n in CONTENDERS
        },
    }
    report.emit_summary(summary, args.json)
    return summary


if __name__ == "__main__":
    main()
