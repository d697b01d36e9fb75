"""Shared helpers of the graphemb benchmarks (imported by every ``bench_*.py``).

* command line: the common options (sizes, steps, ``--quick``, ``--json``) and their defaults;
* workload: batches of random ids, the loss, the expected number of unique rows;
* contenders: one training step (lookup + loss + backward + optimizer step) for graphemb,
  ``torch.nn.Embedding(sparse=True)`` and ``dgl.nn.NodeEmbedding``, built the same way for
  every script;
* timing: warm-up, interleaved rounds (every contender runs a few steps in turn, so that
  the machine's noise spreads over all of them), median and spread, per-round ratios;
* the memory-bandwidth bound: bytes an update must move / measured copy bandwidth;
* per-phase timers that wrap graphemb's internals from the outside (nothing in the core is
  edited: bound methods and module functions are replaced for the duration of a profile
  and restored afterwards);
* ``RankPool``: ranks of a gloo process group over loopback, started with
  ``torch.multiprocessing`` (spawn) around a TCPStore on a port chosen by the OS, that run
  timed blocks on command, so that multi-process contenders interleave with single-process
  ones of the same run;
* output: aligned tables and one machine-readable ``BENCH_SUMMARY {json}`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import secrets
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import torch

SUMMARY_PREFIX = "BENCH_SUMMARY "
LR = 0.01

# Bytes an update must move per unique row and per column, float32 everywhere:
#   Adam:    read + write weight, exp_avg, exp_avg_sq (6 x 4) + read the gradient (4) = 28
#   Adagrad: read + write weight, sum (4 x 4)             + read the gradient (4) = 20
# (Adam's per-row int64 step count, 16 bytes per row, is left out: it does not grow with D.)
UPDATE_BYTES_PER_COLUMN = {"adam": 28, "adagrad": 20}

SIZES = {  # the spec's defaults, and those of --quick
    "default": {"num_embeddings": 1_000_000, "dim": 128, "batch": 100_000,
                "warmup": 3, "steps": 20, "rounds": 5, "bw_mib": 256},
    "quick": {"num_embeddings": 50_000, "dim": 32, "batch": 4_000,
              "warmup": 1, "steps": 4, "rounds": 2, "bw_mib": 32},
}


# =============================================================================== command line
def base_parser(description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """A parser with the options every benchmark shares (``None`` = "take the default")."""
    d = SIZES["default"]
    q = SIZES["quick"]
    parser = argparse.ArgumentParser(
        description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-n", "--num-embeddings", type=int, default=None,
                        help=f"rows of the table (default {d['num_embeddings']:,}; "
                             f"--quick {q['num_embeddings']:,})")
    parser.add_argument("-d", "--dim", type=int, default=None,
                        help=f"embedding dimension D (default {d['dim']}; --quick {q['dim']})")
    parser.add_argument("-b", "--batch", type=int, default=None,
                        help=f"ids per step, uniform with replacement, summed over all "
                             f"processes (default {d['batch']:,}; --quick {q['batch']:,})")
    parser.add_argument("--warmup", type=int, default=None,
                        help=f"untimed steps per contender first (default {d['warmup']})")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"timed steps per contender (default {d['steps']})")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"the timed steps are split into this many interleaved rounds "
                             f"(default {d['rounds']})")
    parser.add_argument("--loss", choices=sorted(LOSSES), default="upstream",
                        help="loss on the looked-up rows, the same for every contender "
                             "(default: upstream)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the ids (default 0)")
    parser.add_argument("--bw-mib", type=int, default=None,
                        help=f"size of each tensor of the copy-bandwidth probe in MiB "
                             f"(default {d['bw_mib']})")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few steps (a smoke test, < 30 s)")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the summary (the BENCH_SUMMARY line's JSON) to PATH")
    return parser


def finish_args(args: argparse.Namespace) -> argparse.Namespace:
    """Fill options left at ``None`` from the default or ``--quick`` sizes; check them."""
    sizes = SIZES["quick" if args.quick else "default"]
    for key, value in sizes.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    for key in ("num_embeddings", "dim", "batch", "steps", "rounds", "bw_mib"):
        if getattr(args, key) <= 0:
            raise SystemExit(f"--{key.replace('_', '-')} must be positive")
    if args.warmup < 0:
        raise SystemExit("--warmup must be >= 0")
    args.rounds = min(args.rounds, args.steps)
    return args


def profile_steps(args: argparse.Namespace) -> int:
    """Instrumented steps of a phase profile."""
    return max(2 if args.quick else 5, args.steps // 2)


def set_threads(threads: int | None) -> int:
    if threads is not None:
        if threads <= 0:
            raise SystemExit("--threads must be positive")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


# =============================================================================== workload
def make_batches(num_embeddings: int, batch: int, count: int, seed: int) -> list[torch.Tensor]:
    """``count`` batches of ``batch`` uniform random ids (with replacement), int64, CPU."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, num_embeddings, (batch,), generator=gen) for _ in range(count)]


def rank_slice(ids: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Contiguous share ``rank`` of a global batch (sizes differ by at most one)."""
    per, extra = divmod(ids.numel(), world_size)
    start = rank * per + min(rank, extra)
    return ids[start:start + per + (1 if rank < extra else 0)]


def expected_unique(num_embeddings: int, draws: int) -> float:
    """Expected distinct ids among ``draws`` uniform draws (with replacement) of ``n`` ids:
    ``n * (1 - (1 - 1/n) ** draws)``."""
    return num_embeddings * -math.expm1(draws * math.log1p(-1.0 / num_embeddings))


def mean_unique(batches: Sequence[torch.Tensor]) -> float:
    return sum(torch.unique(b).numel() for b in batches) / len(batches)


def _square_loss(rows):
    return (rows * rows).sum()


class _LinearLoss:
    """``F.linear(rows, W).sum()`` with a fixed random ``W`` of shape (16, D)."""

    def __init__(self, dim: int, device):
        gen = torch.Generator().manual_seed(1234)
        self.weight = (torch.randn(16, dim, generator=gen) / math.sqrt(dim)).to(device)

    def __call__(self, rows):
        return torch.nn.functional.linear(rows, self.weight).sum()


class _UpstreamLoss:
    """A stand-in for the rest of the model: a scalar whose backward hands the rows a fixed,
    precomputed, contiguous ``(B, D)`` gradient -- as a model's first layer would -- so that
    the timing is the embedding library's own work (lookup, gradient bookkeeping, update),
    not the elementwise ops of a toy loss."""

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, rows, upstream):
            ctx.upstream = upstream
            return rows.new_zeros(())

        @staticmethod
        def backward(ctx, _):
            return ctx.upstream, None

    def __init__(self, dim: int, device):
        self.dim, self.device, self._upstream = dim, torch.device(device), None

    def __call__(self, rows):
        if self._upstream is None or self._upstream.shape != rows.shape:
            gen = torch.Generator().manual_seed(4321)
            self._upstream = torch.randn(rows.shape, generator=gen).to(self.device)
        return self._Fn.apply(rows, self._upstream)


LOSSES = {
    "upstream": "the model's gradient, precomputed: backward hands the looked-up rows a fixed "
                "contiguous (B, D) gradient, so loss and model cost nothing and the timing is "
                "the library's lookup, gradient bookkeeping and update",
    "square": "loss = (rows * rows).sum(); its gradient 2 * rows is a dense, contiguous "
              "(B, D) tensor",
    "linear": "loss = F.linear(rows, W).sum() with a fixed random W (16, D); its gradient "
              "ones(B, 16) @ W is a dense, contiguous (B, D) tensor",
}


def make_loss(kind: str, dim: int, device="cpu") -> Callable[[torch.Tensor], torch.Tensor]:
    if kind == "upstream":
        return _UpstreamLoss(dim, device)
    if kind == "square":
        return _square_loss
    if kind == "linear":
        return _LinearLoss(dim, torch.device(device))
    raise ValueError(f"unknown loss {kind!r}")


def rank_workload(spec: dict, rank: int, world_size: int):
    """This rank's share of every batch and the loss, from a run's ``spec`` (built the
    same way on every rank)."""
    batches = [rank_slice(b, rank, world_size)
               for b in make_batches(spec["num_embeddings"], spec["batch"], 8, spec["seed"])]
    return batches, make_loss(spec["loss"], spec["dim"])


def throughput_results(times: dict, reference: str, batch: int, bound: float,
                       ratio_key: str) -> tuple[dict, list]:
    """Per-contender summary (for the JSON) and table rows of a throughput comparison
    against ``reference``; ``ratio_key`` names the ratio in the summary."""
    results, rows = {}, []
    for name, t in times.items():
        s = stats_ms(flat(t))
        ratio = round_ratios(times[reference], t)
        results[name] = {**s, "rows_per_s": batch / (s["median_ms"] / 1e3), ratio_key: ratio,
                         "fraction_of_bound": bound / s["median_ms"]}
        rows.append([name, f"{s['median_ms']:.1f}", f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}",
                     f"{batch / s['median_ms'] / 1e3:.3f}", fmt_ratio(ratio),
                     f"{100 * bound / s['median_ms']:.0f}%"])
    return results, rows


def unique_name(label: str) -> str:
    """A table name no other process on this machine uses (for shared-memory names)."""
    return f"bench-{label}-{os.getpid()}-{secrets.token_hex(3)}"


def _uniform_init(table):
    table.uniform_(-0.1, 0.1)
    return table


# =============================================================================== contenders
@dataclass
class Contender:
    """One timed unit: ``step(i)`` = lookup of batch ``i`` + loss + backward + optimizer step.

    ``profile(i, recorder)`` does the same with the phases timed; ``instrument(recorder)``
    is a context manager that wraps the library's internals for finer phases.
    """

    name: str
    family: str  # "graphemb" | "torch" | "dgl"
    optimizer: str  # "adam" | "adagrad"
    rows_per_step: int  # ids looked up per step by this process
    step: Callable[[int], None]
    profile: Callable[[int, "PhaseRecorder"], None] | None = None
    instrument: Callable[["PhaseRecorder"], contextlib.AbstractContextManager] | None = None
    objects: list = field(default_factory=list)  # keeps tables alive; dropped by close()

    def close(self) -> None:
        self.objects.clear()
        self.step = self.profile = self.instrument = None


def _phased(lookup, loss, backward_of, update, batches, sync=None):
    """The timed unit and its phase-timed twin, for any stack."""

    def step(i):
        rows = lookup(batches[i % len(batches)])
        backward_of(loss(rows))
        update()

    def profile(i, rec):
        ids = batches[i % len(batches)]
        with rec.phase("lookup", sync):
            rows = lookup(ids)
        with rec.phase("loss (forward)", sync):
            value = loss(rows)
        with rec.phase("backward", sync):
            backward_of(value)
        with rec.phase("step", sync):
            update()
        rec.end_step()

    return step, profile


def graphemb_contender(name: str, optimizer: str, num_embeddings: int, dim: int,
                       batches: Sequence[torch.Tensor], loss, *, table_name: str,
                       device=None, partition=None, lr: float = LR, sync=None) -> Contender:
    """graphemb ``NodeEmbedding`` + ``graphemb.optim.SparseAdam`` / ``SparseAdagrad``.

    Its storage follows graphemb's rules: local without a process group, shared memory
    with one (CPU, no partition), partitioned with ``partition`` or on CUDA.
    """
    import graphemb
    from graphemb.optim import SparseAdagrad, SparseAdam

    emb = graphemb.NodeEmbedding(num_embeddings, dim, table_name, init_func=_uniform_init,
                                 device=device, partition=partition)
    opt = SparseAdam([emb], lr=lr) if optimizer == "adam" else SparseAdagrad([emb], lr=lr)
    step, profile = _phased(emb, loss, lambda v: v.backward(), opt.step, batches, sync)
    return Contender(name, "graphemb", optimizer, batches[0].numel(), step, profile,
                     lambda rec: instrument_graphemb(emb, opt, rec, sync), [emb, opt])


def torch_contender(name: str, optimizer: str, num_embeddings: int, dim: int,
                    batches: Sequence[torch.Tensor], loss, *, device="cpu", lr: float = LR,
                    sync=None) -> Contender:
    """``nn.Embedding(sparse=True)`` + ``torch.optim.SparseAdam`` / ``torch.optim.Adagrad``."""
    checks = getattr(torch.sparse, "check_sparse_tensor_invariants", None)
    if checks is not None and hasattr(checks, "disable"):
        checks.disable()  # torch's default, stated explicitly (silences a warning of Adagrad)
    emb = torch.nn.Embedding(num_embeddings, dim, sparse=True, device=device)
    with torch.no_grad():
        _uniform_init(emb.weight)
    params = list(emb.parameters())
    opt = (torch.optim.SparseAdam(params, lr=lr) if optimizer == "adam"
           else torch.optim.Adagrad(params, lr=lr))

    def update():
        opt.step()
        opt.zero_grad(set_to_none=True)

    step, profile = _phased(emb, loss, lambda v: v.backward(), update, batches, sync)
    return Contender(name, "torch", optimizer, batches[0].numel(), step, profile, None,
                     [emb, opt])


def dgl_contender(name: str, optimizer: str, num_embeddings: int, dim: int,
                  batches: Sequence[torch.Tensor], loss, *, table_name: str,
                  lr: float = LR) -> Contender:
    """``dgl.nn.NodeEmbedding`` + ``dgl.optim.SparseAdam`` / ``SparseAdagrad`` (CPU).

    With ``torch.distributed`` initialised this is DGL's multi-process mode: the table and
    the optimizer state live in DGL shared memory, gradients travel through shared-memory
    buffers, and each rank updates the rows ``id % world_size == rank``. DGL then opens its
    own TCPStore on the fixed port 127.0.0.1:12346 (``dgl/nn/pytorch/sparse_emb.py``).
    """
    import dgl

    emb = dgl.nn.NodeEmbedding(num_embeddings, dim, table_name, init_func=_uniform_init)
    opt = (dgl.optim.SparseAdam([emb], lr=lr) if optimizer == "adam"
           else dgl.optim.SparseAdagrad([emb], lr=lr))

    def update():
        opt.zero_grad()  # DGL: marks the trace to be dropped once this step has used it
        opt.step()

    step, profile = _phased(emb, loss, lambda v: v.backward(), update, batches)
    return Contender(name, "dgl", optimizer, batches[0].numel(), step, profile,
                     lambda rec: instrument_dgl(opt, rec), [emb, opt])


def dgl_available() -> tuple[bool, str]:
    """(True, version) when DGL imports here, else (False, why not)."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    try:
        import dgl  # noqa: F401
    except Exception as err:  # ImportError, or DGL's own errors on an unsupported torch
        return False, f"DGL is not importable on this stack ({type(err).__name__}: {err})"
    return True, dgl.__version__


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


DGL_STORE_PORT = 12346  # hard-coded in dgl/nn/pytorch/sparse_emb.py


# =============================================================================== timing
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def stats_ms(seconds: Sequence[float]) -> dict:
    """Median and spread of step times, in milliseconds."""
    ms = [1e3 * s for s in seconds]
    return {"median_ms": median(ms), "p10_ms": percentile(ms, 10), "p90_ms": percentile(ms, 90),
            "min_ms": min(ms), "max_ms": max(ms), "n": len(ms)}


def time_steps(step: Callable[[int], None], start: int, count: int, sync=None) -> list[float]:
    """Run ``step(start) .. step(start + count - 1)``; the duration of each, in seconds."""
    gc.collect()
    times = []
    for i in range(start, start + count):
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        step(i)
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t0)
    return times


# A "block runner" times `count` consecutive steps starting at batch `start` and returns the
# duration of each step in seconds. For a local contender it calls time_steps; for one that
# runs on a RankPool it sends a command and returns, per step, the slowest rank's duration.
BlockRunner = Callable[[int, int], list[float]]


def local_runner(contender: Contender, sync=None, threads: int | None = None) -> BlockRunner:
    """Runner of a contender of this process; ``threads``: torch threads during its blocks
    (restored afterwards), for contenders that differ from the process's setting."""
    if threads is None:
        return lambda start, count: time_steps(contender.step, start, count, sync)

    def run(start: int, count: int) -> list[float]:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return time_steps(contender.step, start, count, sync)
        finally:
            torch.set_num_threads(before)

    return run


def interleaved(runners: dict[str, BlockRunner], *, warmup: int, steps: int, rounds: int,
                log=print) -> dict[str, list[list[float]]]:
    """Warm every contender up, then ``rounds`` rounds in which each runs its share of
    ``steps`` timed steps in turn (the order rotates from round to round).

    Returns, per contender, the step durations (seconds) of each round.
    """
    names = list(runners)
    cursor = dict.fromkeys(names, 0)
    for name in names:
        if warmup:
            t0 = time.perf_counter()
            runners[name](0, warmup)
            log(f"  warm-up  {name}: {warmup} steps in {time.perf_counter() - t0:.2f} s")
        cursor[name] = warmup
    base, extra = divmod(steps, rounds)
    result = {name: [] for name in names}
    for r in range(rounds):
        count = base + (1 if r < extra else 0)
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            times = runners[name](cursor[name], count)
            cursor[name] += count
            result[name].append(times)
        summary = "  ".join(f"{n}={1e3 * median(result[n][-1]):.1f}" for n in names)
        log(f"  round {r + 1}/{rounds} (ms/step medians): {summary}")
    return result


def flat(per_round: list[list[float]]) -> list[float]:
    return [t for block in per_round for t in block]


def round_ratios(numerator: list[list[float]], denominator: list[list[float]]) -> dict:
    """``median(numerator) / median(denominator)`` overall and per round (min, max).

    With step times, ``round_ratios(peer, ours)`` is our speed-up over the peer.
    """
    overall = median(flat(numerator)) / median(flat(denominator))
    per_round = [median(a) / median(b) for a, b in zip(numerator, denominator)]
    return {"ratio": overall, "round_min": min(per_round), "round_max": max(per_round),
            "per_round": per_round}


def fmt_ratio(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['ratio']:.2f}x [{r['round_min']:.2f}-{r['round_max']:.2f}]"


# =============================================================================== bandwidth
def copy_bandwidth(mib: int = 256, repeats: int = 9, device="cpu") -> dict:
    """Memory bandwidth from ``dst.copy_(src)`` of two preallocated ``mib`` MiB tensors:
    ``2 * bytes / time`` (one read and one write per byte), median over ``repeats``."""
    device = torch.device(device)
    nbytes = mib << 20
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)  # both touched: no page faults inside the timing
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    dst.copy_(src)
    times = time_steps(lambda _: dst.copy_(src), 0, repeats, sync)
    del src, dst
    rates = [2 * nbytes / t for t in times]
    # The bound uses the fastest copy: on a shared machine other processes only ever slow a
    # copy down, so the best of several is the steadiest estimate of what the memory can do
    # (the median is reported beside it).
    return {"bytes_per_s": max(rates), "median_bytes_per_s": median(rates),
            "min_bytes_per_s": min(rates), "tensor_mib": mib, "repeats": repeats,
            "device": str(device), "threads": torch.get_num_threads()}


def update_bytes(optimizer: str, dim: int, unique_rows: float) -> float:
    return UPDATE_BYTES_PER_COLUMN[optimizer] * dim * unique_rows


def bound_ms(optimizer: str, dim: int, unique_rows: float, bandwidth: dict) -> float:
    """Time to move the bytes an update must move at the measured copy bandwidth."""
    return 1e3 * update_bytes(optimizer, dim, unique_rows) / bandwidth["bytes_per_s"]


def fmt_bw(bandwidth: dict) -> str:
    return (f"{bandwidth['bytes_per_s'] / 1e9:.1f} GB/s, best of {bandwidth['repeats']} "
            f"(median {bandwidth['median_bytes_per_s'] / 1e9:.1f}, slowest "
            f"{bandwidth['min_bytes_per_s'] / 1e9:.1f}) = 2 x bytes / time of dst.copy_(src), "
            f"2 x {bandwidth['tensor_mib']} MiB, {bandwidth['device']}, "
            f"{bandwidth['threads']} threads")


# =============================================================================== phases
class PhaseRecorder:
    """Per-step durations of named phases (nested phases are recorded as well)."""

    def __init__(self) -> None:
        self._current: dict[str, float] = defaultdict(float)
        self._calls: dict[str, int] = defaultdict(int)
        self.steps: list[dict[str, float]] = []
        self.order: list[str] = []

    @contextlib.contextmanager
    def phase(self, label: str, sync=None):
        if label not in self.order:
            self.order.append(label)
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if sync is not None:
                sync()
            self._current[label] += time.perf_counter() - t0
            self._calls[label] += 1

    def wrap(self, label: str, fn: Callable, sync=None) -> Callable:
        def timed(*args, **kwargs):
            with self.phase(label, sync):
                return fn(*args, **kwargs)

        return timed

    def end_step(self) -> None:
        self.steps.append(dict(self._current))
        self._current.clear()

    def medians_ms(self) -> dict[str, float]:
        """Median per phase; for a phase with sub-phases ("step" and "step: x") also the
        median of its per-step remainder "step: (rest)" (never negative, unlike the
        difference of medians)."""
        keys = list(self.order)
        steps = [dict(s) for s in self.steps]
        for top in [k for k in self.order if ":" not in k]:
            subs = [k for k in self.order if k.startswith(f"{top.split(' ')[0]}:")]
            if subs:
                rest = f"{top.split(' ')[0]}: (rest)"
                keys.append(rest)
                for s in steps:
                    s[rest] = s.get(top, 0.0) - sum(s.get(k, 0.0) for k in subs)
        return {k: 1e3 * median([s.get(k, 0.0) for s in steps]) for k in keys}

    def calls_per_step(self) -> dict[str, float]:
        n = max(1, len(self.steps))
        return {k: self._calls.get(k, 0) / n for k in self.order}


@contextlib.contextmanager
def _patched(patches: list[tuple[object, str, Callable[[Callable], Callable]]]):
    """Replace ``obj.attr`` by ``make(original)`` for each patch that applies; restore after.

    A patch whose attribute is missing (the core changed) is skipped: its phase shows 0.
    """
    undo = []
    try:
        for obj, attr, make in patches:
            original = getattr(obj, attr, None)
            if original is None:
                continue
            own = attr in getattr(obj, "__dict__", {})
            setattr(obj, attr, make(original))
            undo.append((obj, attr, original, own))
        yield
    finally:
        for obj, attr, original, own in reversed(undo):
            if own:  # a module function (or an attribute set on the instance): put it back
                setattr(obj, attr, original)
            else:  # our instance attribute shadowed the class's method: remove it
                delattr(obj, attr)


def instrument_graphemb(emb, opt, rec: PhaseRecorder, sync=None):
    """Time graphemb's internals from outside: the storage's row reads (lookup), and inside
    ``step``: taking the recorded gradients, coalescing, the exchange (push to owners,
    barrier), gathering weight/state rows, the update formula, scattering rows back."""
    import graphemb.optim.optimizer as optimizer_module

    storage = emb._storage

    def wrap(label):
        return lambda fn: rec.wrap(label, fn, sync)

    patches = [
        (storage, "read_rows", wrap("lookup: storage.read_rows")),
        (emb, "_take_gradients", wrap("step: take recorded gradients")),
        (optimizer_module, "coalesce_rows", wrap("step: coalesce (unique + index_add_)")),
        (optimizer_module, "gather_rows", wrap("step: gather weight+state rows")),
        (opt, "_update_rows", wrap("step: update formula")),
        (optimizer_module, "scatter_rows", wrap("step: scatter rows back")),
        # the fused CPU path: sort the rows, then one kernel call
        (optimizer_module.torch, "sort", wrap("step: fused: sort rows")),
        (opt, "_fused_update", wrap("step: fused: kernel (sum, formula, in place)")),
    ]
    if getattr(storage, "distributed", False):
        patches += [
            (storage, "push", wrap("step: exchange: storage.push")),
            (storage, "after_update", wrap("step: exchange: storage.after_update")),
        ]
    return _patched(patches)


def instrument_dgl(opt, rec: PhaseRecorder):
    """DGL's step = gradient exchange (shared-memory buffers + barriers) + ``update``
    (unique, mean of duplicates, gather, formula, scatter)."""
    return _patched([(opt, "update", lambda fn: rec.wrap("step: update (dgl)", fn))])


REST_NOTES = {
    "graphemb": "outside the timed sub-phases: python, autograd, glue",
    "dgl": "DGL's gradient exchange: shared-memory buffers, 2 barriers",
}


def profile_phases(contender: Contender, start: int, count: int) -> dict:
    """Run ``count`` phase-timed steps; per-phase median ms and calls per step."""
    rec = PhaseRecorder()
    manager = contender.instrument(rec) if contender.instrument else contextlib.nullcontext()
    gc.collect()
    with manager:
        for i in range(start, start + count):
            contender.profile(i, rec)
    return {"phases_ms": rec.medians_ms(), "calls": rec.calls_per_step(), "steps": count,
            "rest_note": REST_NOTES.get(contender.family)}


def print_phases(title: str, phases: dict, total_ms: float | None = None) -> None:
    """Top-level phases, each followed by its sub-phases ("step: x" under "step") and the
    median of what its sub-phases leave out (python, autograd, glue)."""
    ms = phases["phases_ms"]
    calls = phases["calls"]
    top = [k for k in ms if ":" not in k]
    step_total = sum(ms[k] for k in top)
    rows = []
    for key in top:
        rows.append([key, f"{ms[key]:.2f}", f"{100 * ms[key] / step_total:.0f}%", ""])
        prefix = f"{key.split(' ')[0]}:"
        for sub in [k for k in ms if k.startswith(prefix)]:
            note = f"{calls.get(sub, 0):.0f} calls" if calls.get(sub, 0) > 1.01 else ""
            if sub.endswith("(rest)"):
                note = phases.get("rest_note") or "outside the timed sub-phases"
            rows.append(["  " + sub.split(": ", 1)[1], f"{ms[sub]:.2f}",
                         f"{100 * ms[sub] / step_total:.0f}%", note])
    rows.append(["sum of phases", f"{step_total:.2f}", "100%",
                 f"(uninstrumented step: {total_ms:.2f} ms)" if total_ms else ""])
    print(f"\n{title} (median over {phases['steps']} instrumented steps)")
    print_table(["phase", "ms", "share", "note"], rows)


# =============================================================================== output
def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        out = []
        for i, cell in enumerate(row):
            numeric = cell[:1].isdigit() or cell[:1] == "-" and cell[1:2].isdigit()
            out.append(cell.rjust(widths[i]) if numeric and i else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


def environment() -> dict:
    """Date, machine and software stack, for the summary."""
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for text in f:
                if text.startswith("model name"):
                    cpu = text.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    env = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        # other processes' load: on a shared machine, read every number against it
        "loadavg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    if "dgl" in sys.modules:
        env["dgl"] = sys.modules["dgl"].__version__
    env.update(_graphemb_revision())
    try:
        import graphemb

        env["graphemb"] = graphemb.__version__
    except Exception:  # noqa: BLE001 - informative only
        pass
    return env


def _graphemb_revision() -> dict:
    """The commit of the checkout that graphemb is imported from, and whether tracked files
    of graphemb/ have uncommitted changes (read-only git queries; empty where git or the
    checkout is absent)."""
    import subprocess

    try:
        import graphemb

        root = os.path.dirname(os.path.dirname(os.path.abspath(graphemb.__file__)))
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain",
                                "--untracked-files=no", "--", "graphemb"],
                               capture_output=True, text=True, timeout=10)
    except Exception:  # noqa: BLE001 - informative only
        return {}
    if head.returncode != 0:
        return {}
    return {"graphemb_commit": head.stdout.strip(),
            "graphemb_uncommitted_changes": bool(dirty.stdout.strip())}


def print_header(title: str, args: argparse.Namespace, extra: str = "") -> None:
    env = environment()
    print(f"== {title} ==")
    revision = env.get("graphemb_commit", "?")
    if env.get("graphemb_uncommitted_changes"):
        revision += " + uncommitted changes in graphemb/"
    print(f"{env['date']} | {env['cpu']} | {env['cores']} cores | python {env['python']} | "
          f"torch {env['torch']} | torch threads {env['torch_threads']} | "
          f"graphemb {revision} | load average (1 min) before the run {env['loadavg_1min']}")
    print(f"N={args.num_embeddings:,} D={args.dim} batch={args.batch:,} float32 | "
          f"warm-up {args.warmup} + {args.steps} timed steps per contender in {args.rounds} "
          f"interleaved rounds{' | --quick' if args.quick else ''}{extra}")
    print(f"loss: {LOSSES[args.loss]}")


def emit_summary(summary: dict, path: str | None) -> None:
    summary = {"environment": environment(), **summary}
    text = json.dumps(summary, sort_keys=False, default=_json_default)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
    print(SUMMARY_PREFIX + text, flush=True)


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (torch.device, torch.dtype)):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def target_mark(value: float, target: float) -> str:
    return f"target >= {target:g}x: {'MET' if value >= target else 'NOT MET'}"


# =============================================================================== rank pool
class RankFailure(RuntimeError):
    """A rank of a RankPool raised, died, or did not answer in time."""


class RankPool:
    """``world_size`` processes of one gloo process group that run benchmark blocks on command.

    The parent hosts a TCPStore on a port the OS picks (port 0) and starts the ranks with
    ``torch.multiprocessing`` (spawn); each rank sets its thread count, joins the process
    group through that store (it becomes the group's default store, as under torchrun),
    calls ``build(rank, world_size, spec)`` -> dict of :class:`Contender`, and then waits for
    commands: run ``count`` timed steps of a contender (all ranks together, after a barrier),
    or phase-profile it, or stop. The parent itself never joins the process group, so it
    can time single-process contenders in between (interleaved with the ranks' blocks; the
    waiting ranks sleep in the store and use no CPU).
    """

    def __init__(self, build: Callable, world_size: int, spec: dict, *, threads_per_rank: int = 1,
                 timeout: float = 1800.0, log=print) -> None:
        import torch.distributed as dist
        import torch.multiprocessing as mp

        self.world_size = world_size
        self.timeout = timeout
        self._log = log
        self._counter = 0
        self._store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                    timeout=timedelta(seconds=timeout))
        self._context = mp.start_processes(
            _rank_main,
            args=(world_size, self._store.port, threads_per_rank, timeout, build, spec),
            nprocs=world_size, join=False, start_method="spawn",
        )
        t0 = time.perf_counter()
        ready = self._wait("bench/ready", "the ranks to build their contenders")
        self.contenders: dict[str, dict] = ready[0]
        log(f"  {world_size} ranks ready in {time.perf_counter() - t0:.1f} s: "
            f"{', '.join(self.contenders) or '(no contenders)'}")

    # ------------------------------------------------------------------ commands
    def _command(self, command: dict, what: str) -> list:
        k = self._counter
        self._counter += 1
        self._store.set(f"bench/cmd/{k}", json.dumps(command))
        return self._wait(f"bench/ack/{k}", what)

    def runner(self, name: str) -> BlockRunner:
        """Block runner of contender ``name``: per step, the slowest rank's duration."""

        def run(start: int, count: int) -> list[float]:
            answers = self._command({"op": "time", "name": name, "start": start, "count": count},
                                    f"{name}: {count} steps")
            return [max(a["times"][i] for a in answers) for i in range(count)]

        return run

    def profile(self, name: str, start: int, count: int) -> list[dict]:
        """Per-rank phase profile of ``count`` steps of ``name``."""
        return self._command({"op": "profile", "name": name, "start": start, "count": count},
                             f"{name}: profile")

    def close(self) -> None:
        """Stop the ranks (they leave the group cleanly and exit) and the store."""
        if self._context is None:
            return
        try:
            self._store.set(f"bench/cmd/{self._counter}", json.dumps({"op": "stop"}))
            deadline = time.monotonic() + 120
            while not self._context.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise RankFailure("ranks did not exit within 120 s of 'stop'")
        finally:
            self._kill()

    def _kill(self) -> None:
        if self._context is None:
            return
        for process in self._context.processes:
            if process.is_alive():
                process.kill()
                process.join()
        self._context = None

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if kind is None:
            self.close()
        else:
            self._kill()

    # ------------------------------------------------------------------ waiting
    def _wait(self, key: str, what: str) -> list:
        """Wait until every rank has answered under ``key`` (a counter the ranks increment
        after writing ``key/<rank>``), checking that they are alive; their JSON answers.

        Polls (every 5 ms) rather than blocking in ``store.wait``, whose timeouts log a
        warning each time on some torch versions; the ranks time their own steps, so the
        polling latency is not part of any measurement.
        """
        import torch.multiprocessing as mp

        deadline = time.monotonic() + self.timeout
        next_check = 0.0
        while self._store.add(key, 0) < self.world_size:
            time.sleep(0.005)
            now = time.monotonic()
            if now < next_check:
                continue
            next_check = now + 0.5
            try:
                finished = self._context.join(timeout=0)
            except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
                self._kill()
                raise RankFailure(f"a rank failed while waiting for {what}:\n{err}") from None
            if finished:
                self._kill()
                raise RankFailure(f"the ranks exited while the parent waited for {what}")
            if now > deadline:
                self._kill()
                raise RankFailure(f"no answer within {self.timeout:g} s for {what}")
        return [json.loads(self._store.get(f"{key}/{r}")) for r in range(self.world_size)]


def _rank_main(rank, world_size, port, threads, timeout, build, spec):
    import torch.distributed as dist

    torch.set_num_threads(threads)
    os.environ.setdefault("DGLBACKEND", "pytorch")
    wait = timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=wait)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=wait)
    contenders = build(rank, world_size, spec)
    _answer(store, "bench/ready", rank,
            {n: {"family": c.family, "optimizer": c.optimizer, "rows_per_step": c.rows_per_step}
             for n, c in contenders.items()})
    k = 0
    while True:
        key = f"bench/cmd/{k}"
        store.wait([key], wait)
        command = json.loads(store.get(key))
        if command["op"] == "stop":
            break
        contender = contenders[command["name"]]
        dist.barrier()  # every rank starts the block together
        if command["op"] == "time":
            answer = {"times": time_steps(contender.step, command["start"], command["count"])}
        else:
            answer = profile_phases(contender, command["start"], command["count"])
        _answer(store, f"bench/ack/{k}", rank, answer)
        k += 1
    for contender in contenders.values():
        contender.close()
    contenders.clear()
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def _answer(store, key: str, rank: int, value) -> None:
    store.set(f"{key}/{rank}", json.dumps(value))
    store.add(key, 1)  # the parent polls this counter
