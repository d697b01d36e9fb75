#!/usr/bin/env python
"""Skip-gram (DeepWalk) training throughput: graphemb against plain torch, same run.

One training step = draw a batch of uniform random walks on a synthetic community graph
(graphemb.datasets.stochastic_block_model), draw K negatives per walk position (degree **
0.75), compute the SGNS loss over every (center, context) pair within the window, backward,
sparse Adam step on the center and context tables. Throughput = positive training pairs per
second. Every contender trains on the SAME walks and negatives (seeded per step), from the
same initial tables, and the losses of the first step are checked to agree:

  1 process, --threads threads:
    graphemb         graphemb.skipgram.SkipGram (rows looked up once per walk position,
                     pairs scored by one batched product per walk) + graphemb SparseAdam
    graphemb-pairs   the same tables and optimizer fed the explicit pair list
                     (SkipGram.pair_loss): isolates what the model's layout brings
    torch            the plain way: two torch.nn.Embedding(sparse=True) tables, the pair list
                     (each pair with its center position's negatives), torch.optim.SparseAdam
    walks+negatives  drawing the batch alone (included in every contender above)
  --world-size processes x 1 thread (gloo over loopback), each drawing its slice of the batch:
    graphemb xN      SkipGram with shared-memory tables + graphemb SparseAdam
    torch xN         DistributedDataParallel(torch model, sparse gradients) + SparseAdam

Contenders are interleaved in rounds (the multi-process ones run in ranks kept alive for the
whole run), so load from other processes hits all of them alike. Target: graphemb >= 5x
torch, with 1 and with N processes.

Measurements: benchmarks/README.md ("bench_skipgram.py"). Most of the gain is the
model's layout (rows looked up once per walk position instead of once per pair).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from harness import cli, report, timing
from harness.peers import Contender
from harness.ranks import RankPool

from graphemb.datasets import stochastic_block_model
from graphemb.graph import Graph
from graphemb.optim import SparseAdam
from graphemb.sampling.walks import PAD, RandomWalker
from graphemb.skipgram import NegativeSampler, SkipGram, context_pairs

TARGET = 5.0
LR = 0.01
QUICK = {
    "nodes": 20_000,
    "dim": 32,
    "walk_length": 20,
    "batch_walks": 64,
    "steps": 3,
    "warmup": 1,
    "rounds": 2,
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=200_000, help="nodes of the graph (200,000)")
    parser.add_argument("--communities", type=int, default=20, help="planted communities (20)")
    parser.add_argument("--degree", type=float, default=10.0, help="average degree (10)")
    parser.add_argument("--dim", type=int, default=128, help="embedding size (128)")
    parser.add_argument("--walk-length", type=int, default=40, help="steps per walk (40)")
    parser.add_argument("--window", type=int, default=5, help="context window (5)")
    parser.add_argument("--negatives", type=int, default=5, help="negatives per position (5)")
    parser.add_argument(
        "--batch-walks", type=int, default=256, help="walks per step, over all processes (256)"
    )
    parser.add_argument(
        "--steps", type=int, default=4, help="timed steps per contender and round (4)"
    )
    cli.add_timing_options(parser, warmup=2, rounds=5)
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads of the single-process contenders (2)"
    )
    parser.add_argument(
        "--world-size",
        type=int,
        default=2,
        help="processes of the multi-process contenders (2; 0 leaves them out)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = cli.parse_with_quick(parser, argv, QUICK)
    if args.world_size == 1 or args.world_size < 0:
        parser.error("--world-size must be 0 or >= 2")
    return args


# ---------------------------------------------------------------------------- workload
class Workload:
    """The graph, the walker and the sampler; batches seeded by step, identical for every
    contender (a rank draws its slice of the batch's start nodes)."""

    def __init__(self, args: argparse.Namespace) -> None:
        data = stochastic_block_model(
            args.nodes, args.communities, avg_degree=args.degree, seed=args.seed
        )
        self.graph = Graph.from_dataset(data)
        self.walker = RandomWalker(self.graph)
        self.sampler = NegativeSampler.from_graph(self.graph)
        self.args = args
        self._positions: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def batch(self, step: int, rank: int = 0, world_size: int = 1):
        """Walks (W, T) and negatives (W, T, K) of ``rank`` at ``step``."""
        generator = torch.Generator().manual_seed(self.args.seed * 7919 + step)
        start = torch.randint(
            0, self.graph.num_nodes, (self.args.batch_walks,), generator=generator
        )
        start = start.tensor_split(world_size)[rank]
        generator = torch.Generator().manual_seed(self.args.seed * 7919 + step * 131 + rank + 1)
        walks = self.walker(start, self.args.walk_length, generator=generator)
        negatives = self.sampler((*walks.shape, self.args.negatives), generator=generator)
        return walks, negatives

    def pairs(self, walks: torch.Tensor, negatives: torch.Tensor):
        """The plain pair list: (centers, contexts, negatives of each pair's center)."""
        shape = tuple(walks.shape)
        if shape not in self._positions:  # which positions pair up depends on the shape only
            positions = torch.arange(walks.numel()).view(shape)
            self._positions[shape] = context_pairs(positions, self.args.window)
        center_at, context_at = self._positions[shape]
        flat = walks.reshape(-1)
        valid = (flat[center_at] != PAD) & (flat[context_at] != PAD)
        center_at, context_at = center_at[valid], context_at[valid]
        return (
            flat[center_at],
            flat[context_at],
            negatives.reshape(-1, negatives.shape[-1])[center_at],
        )


class TorchSkipGram(torch.nn.Module):
    """Plain torch SGNS: two sparse nn.Embedding tables, loss over an explicit pair list."""

    def __init__(self, num_nodes: int, dim: int) -> None:
        super().__init__()
        self.center = torch.nn.Embedding(num_nodes, dim, sparse=True)
        self.context = torch.nn.Embedding(num_nodes, dim, sparse=True)

    def forward(self, centers, contexts, negatives):
        u = self.center(centers)
        positive = F.logsigmoid((u * self.context(contexts)).sum(-1)).sum()
        negative = F.logsigmoid(-(self.context(negatives) * u.unsqueeze(1)).sum(-1)).sum()
        return -(positive + negative) / max(centers.numel(), 1)


def initial_tables(args) -> tuple[torch.Tensor, torch.Tensor]:
    """Both tables random, large enough for dot products far from 0: word2vec's start
    (tiny center rows, zero context rows) gives a first loss of 6 log 2 whatever the data,
    which would make the check that all contenders train on the same data vacuous."""
    generator = torch.Generator().manual_seed(args.seed)
    return (
        torch.randn(args.nodes, args.dim, generator=generator) * 0.2,
        torch.randn(args.nodes, args.dim, generator=generator) * 0.2,
    )


def make_contenders(workload: Workload, args, names, tag: str = "") -> dict:
    """name -> step(step_index) -> (loss, positive pairs of this process)."""
    center, context = initial_tables(args)
    contenders = {}
    for name in names:
        if name.startswith("graphemb"):
            model = SkipGram(
                args.nodes,
                args.dim,
                window=args.window,
                name=f"bench-{name}{tag}".replace(" ", ""),
                timeout=600,
                sharing="position",  # the layout this benchmark measures
            )
            model.center.all_set_embedding(center)
            model.context.all_set_embedding(context)
            optimizer = SparseAdam(model.embeddings, lr=LR)
            contenders[name] = _graphemb_step(workload, model, optimizer, "pairs" in name)
        elif name.startswith("torch"):
            model = TorchSkipGram(args.nodes, args.dim)
            with torch.no_grad():
                model.center.weight.copy_(center)
                model.context.weight.copy_(context)
            wrapped = model
            if dist.is_initialized():  # data-parallel: DDP averages the sparse gradients
                wrapped = torch.nn.parallel.DistributedDataParallel(model)
            optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=LR)
            contenders[name] = _torch_step(workload, wrapped, optimizer)
        else:  # drawing the data only
            contenders[name] = _data_step(workload)
    return contenders


def _rank() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _graphemb_step(workload, model, optimizer, explicit_pairs: bool):
    def step(index: int):
        walks, negatives = workload.batch(index, *_rank())
        if explicit_pairs:
            centers, contexts, pair_negatives = workload.pairs(walks, negatives)
            loss = model.pair_loss(centers, contexts, pair_negatives)
            pairs = centers.numel()
        else:
            loss = model(walks, negatives)
            pairs = SkipGram.num_pairs(walks, workload.args.window)
        loss.backward()
        optimizer.step()
        return loss.item(), pairs

    return step


def _torch_step(workload, model, optimizer):
    def step(index: int):
        walks, negatives = workload.batch(index, *_rank())
        centers, contexts, pair_negatives = workload.pairs(walks, negatives)
        optimizer.zero_grad()
        loss = model(centers, contexts, pair_negatives)
        loss.backward()
        optimizer.step()
        return loss.item(), centers.numel()

    return step


def _data_step(workload):
    def step(index: int):
        walks, _ = workload.batch(index, *_rank())
        return 0.0, SkipGram.num_pairs(walks, workload.args.window)

    return step


# ---------------------------------------------------------------------------- ranks
MULTI = ("graphemb x{n}", "torch x{n}")


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Runs on each rank of the :class:`harness.ranks.RankPool`: the multi-process
    contenders, each rank drawing its slice of every batch."""
    args = argparse.Namespace(**spec)
    names = [m.format(n=world_size) for m in MULTI]
    steps = make_contenders(Workload(args), args, names, tag="-ranks")
    return {name: _contender(name, step, args, world_size) for name, step in steps.items()}


def _contender(name: str, step, args, world_size: int = 1) -> Contender:
    """``step`` (index -> (loss, pairs)) as a harness contender; rows: walk positions."""
    rows = args.batch_walks * args.walk_length // world_size
    family = name.split()[0].split("-")[0]
    return Contender(name, family, "adam", rows, step=step, profile=step)


def pairs_per_step(workload: Workload, indices: range, world_size: int) -> float:
    """Mean positive pairs of the steps ``indices`` over all ranks of ``world_size`` (the
    batches are seeded by step and rank, so this counts what the contenders trained on)."""
    total = 0
    for index in indices:
        for rank in range(world_size):
            walks, _ = workload.batch(index, rank, world_size)
            total += SkipGram.num_pairs(walks, workload.args.window)
    return total / len(indices)


# ---------------------------------------------------------------------------- main
def print_header(args) -> None:
    report.print_file_header("bench_skipgram: skip-gram training, graphemb against torch", {})
    print(
        f"# graph: sbm {args.nodes:,} nodes, {args.communities} communities, degree "
        f"{args.degree}; dim {args.dim}, walks of {args.walk_length} steps, window "
        f"{args.window}, {args.negatives} negatives per position, {args.batch_walks} walks "
        f"per step; Adam lr {LR}; {args.threads} threads (1 process), {args.world_size} "
        f"processes x 1 thread; warm-up {args.warmup} + {args.steps} steps x {args.rounds} "
        f"interleaved rounds{' | --quick' if args.quick else ''}",
        flush=True,
    )


def first_losses(steps: dict, pool: RankPool | None, names: list[str]) -> dict[str, float]:
    """The loss of step 0 of every contender (the same batch and tables for all); a
    multi-process loss is the mean over the ranks' equal shares."""
    losses = {}
    for name in names:
        if name in steps:
            losses[name] = steps[name](0)[0]
        elif pool is not None:
            losses[name] = statistics.fmean(value[0] for value in pool.call(name, 0))
    return losses


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print_header(args)
    workload = Workload(args)
    single = ["graphemb", "graphemb-pairs", "torch", "walks+negatives"]
    steps = make_contenders(workload, args, single)
    multi = [m.format(n=args.world_size) for m in MULTI] if args.world_size else []
    spec = {k: v for k, v in vars(args).items() if k != "json"}
    pool = RankPool(build_ranks, args.world_size, spec, timeout=600) if multi else None
    try:
        names = single + multi
        losses = first_losses(steps, pool, names)  # step 0, untimed
        runners = {n: timing.local_runner(steps[n]) for n in single}
        runners.update({n: pool.runner(n) for n in multi} if pool else {})
        # step 0 ran above: the warm-up and the timed steps start at 1, alike for every one
        times = timing.interleaved(
            {n: _after_first(r) for n, r in runners.items()},
            warmup=args.warmup - 1,
            steps=args.steps * args.rounds,
            rounds=args.rounds,
        )
    finally:
        if pool is not None:
            pool.close()
    timed = range(args.warmup, args.warmup + args.steps * args.rounds)
    pairs = {1: pairs_per_step(workload, timed, 1)}
    if multi:
        pairs[args.world_size] = pairs_per_step(workload, timed, args.world_size)
    return summarize(args, names, times, losses, pairs)


def _after_first(runner: timing.BlockRunner) -> timing.BlockRunner:
    """``runner`` with step indices counted from 1 (step 0 gave the first losses)."""
    return lambda start, count: runner(start + 1, count)


def speedup(times: dict, pairs: dict, numerator: str, denominator: str) -> dict:
    """Pairs per second of ``numerator`` over ``denominator``, overall and per round
    (:func:`harness.timing.round_ratios` of the step times, scaled by the pairs a step
    trains where the two draw different batches: one process against several)."""
    scale = pairs[_world(numerator)] / pairs[_world(denominator)]
    ratio = timing.round_ratios(times[denominator], times[numerator])
    return {
        "ratio": ratio["ratio"] * scale,
        "round_min": ratio["round_min"] * scale,
        "round_max": ratio["round_max"] * scale,
        "per_round": [r * scale for r in ratio["per_round"]],
    }


def _world(name: str) -> int:
    return int(name.rsplit(" x", 1)[1]) if " x" in name else 1


def summarize(args, names: list[str], times: dict, losses: dict, pairs: dict) -> dict:
    """The table, the ratios and their verdicts, the loss check and the summary line."""
    stats = {name: timing.stats_ms(timing.flat(times[name])) for name in names}
    rows = []
    for name in names:
        s = stats[name]
        loss = f"{losses[name]:.6f}" if name != "walks+negatives" else "-"
        rate = pairs[_world(name)] / (s["median_ms"] / 1e3)
        spread = f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}"
        rows.append([name, f"{rate:,.0f}", f"{s['median_ms']:.1f}", spread, loss])
    print()
    report.print_table(["contender", "pairs/s", "ms/step", "p10-p90 ms", "first loss"], rows)

    comparisons = [  # (label, numerator, denominator, target)
        ("graphemb / torch, 1 process", "graphemb", "torch", TARGET),
        ("graphemb-pairs / torch (tables and optimizer only)", "graphemb-pairs", "torch", None),
    ]
    groups = [["graphemb", "graphemb-pairs", "torch"]]
    if len(names) > 4:
        g, t = names[4:]
        comparisons += [
            (f"{g} / {t}, {args.world_size} processes", g, t, TARGET),
            (f"{g} / graphemb 1 process", g, "graphemb", None),
        ]
        groups.append([g, t])
    print()
    ratios = {}
    for label, numerator, denominator, target in comparisons:
        ratio = speedup(times, pairs, numerator, denominator)
        mark = f"  {report.verdict(ratio['ratio'], target)}" if target else ""
        print(f"{label}: {timing.fmt_ratio(ratio)}{mark}")
        ratios[label] = {**ratio, "target": target}
    # Within a group every contender trained on the same batches from the same tables.
    agree = all(
        max(losses[n] for n in group) - min(losses[n] for n in group)
        <= 1e-4 * abs(losses[group[0]])
        for group in groups
    )
    same = "yes" if agree else "NO"
    print(f"first-step losses agree within each group (same data, same tables): {same}")
    summary = {
        "benchmark": "skipgram",
        "config": {k: v for k, v in vars(args).items() if k != "json"},
        "pairs_per_step": {str(k): v for k, v in pairs.items()},
        "results": stats,
        "ratios": ratios,
        "first_step_losses": losses,
        "first_step_losses_agree": agree,
    }
    report.emit_summary(summary, args.json)
    if not agree:
        sys.exit("the contenders disagree on the loss of the first step: not the same training")
    return summary


if __name__ == "__main__":
    main()
