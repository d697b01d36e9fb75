"""Timed blocks of steps, interleaved rounds, and the statistics of their durations.

A *block runner* times ``count`` consecutive steps starting at batch ``start`` and returns
the duration of each step in seconds: :func:`local_runner` for a contender of this process,
:meth:`harness.ranks.RankPool.runner` for one that runs on spawned ranks (per step, the
slowest rank's duration).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence

import torch

BlockRunner = Callable[[int, int], list[float]]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100] (``nan`` for no values)."""
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
    return {
        "median_ms": median(ms),
        "p10_ms": percentile(ms, 10),
        "p90_ms": percentile(ms, 90),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "n": len(ms),
    }


def time_steps(
    step: Callable[[int], object], start: int, count: int, sync: Callable[[], None] | None = None
) -> list[float]:
    """Run ``step(start) .. step(start + count - 1)``; the duration of each, in seconds.

    ``sync`` (e.g. ``torch.cuda.synchronize``) runs before and after every step, so that
    asynchronous device work is inside the step it belongs to.
    """
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


def local_runner(
    step: Callable[[int], object],
    sync: Callable[[], None] | None = None,
    threads: int | None = None,
) -> BlockRunner:
    """Runner of a step of this process; ``threads``: torch threads during its blocks
    (restored afterwards), for contenders that differ from the process's setting."""
    if threads is None:
        return lambda start, count: time_steps(step, start, count, sync)

    def run(start: int, count: int) -> list[float]:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return time_steps(step, start, count, sync)
        finally:
            torch.set_num_threads(before)

    return run


def interleaved(
    runners: dict[str, BlockRunner],
    *,
    warmup: int,
    steps: int,
    rounds: int,
    log: Callable[[str], None] = print,
) -> dict[str, list[list[float]]]:
    """Warm every contender up, then ``rounds`` rounds in which each runs its share of
    ``steps`` timed steps in turn (the order rotates from round to round), so that the
    machine's noise spreads over all of them.

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
    result: dict[str, list[list[float]]] = {name: [] for name in names}
    for r in range(rounds):
        count = base + (1 if r < extra else 0)
        order = names[r % len(names) :] + names[: r % len(names)]
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
    per_round = [median(a) / median(b) for a, b in zip(numerator, denominator, strict=True)]
    return {
        "ratio": overall,
        "round_min": min(per_round),
        "round_max": max(per_round),
        "per_round": per_round,
    }


def fmt_ratio(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['ratio']:.2f}x [{r['round_min']:.2f}-{r['round_max']:.2f}]"
