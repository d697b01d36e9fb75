"""Options every benchmark shares, and their default and ``--quick`` sizes.

Every script of ``benchmarks/`` builds its parser here: :func:`parser` (the root of the
family: the allocator options every benchmark has), or :func:`base_parser` (the sizes of an
embedding workload on top). A benchmark then calls :func:`apply_allocator` once, right after
parsing and before its first tensor: importing the harness sets nothing.
"""

from __future__ import annotations

import argparse

import torch

from . import allocation
from .workload import LOSSES

SIZES = {  # the spec's defaults, and those of --quick
    "default": {
        "num_embeddings": 1_000_000,
        "dim": 128,
        "batch": 100_000,
        "warmup": 3,
        "steps": 20,
        "rounds": 5,
        "bw_mib": 256,
    },
    "quick": {
        "num_embeddings": 50_000,
        "dim": 32,
        "batch": 4_000,
        "warmup": 1,
        "steps": 4,
        "rounds": 2,
        "bw_mib": 32,
    },
}


def parser(
    description: str, epilog: str | None = None, *, allocator: bool = True
) -> argparse.ArgumentParser:
    """The parser every script starts from: its description and epilog as written, and the
    allocator options of a run (``--huge-pages``, ``--omp-wait-policy``; see
    :func:`apply_allocator`).

    Parameters
    ----------
    description : str
        First paragraph of ``--help``.
    epilog : str, optional
        Text after the options (kept as written, line breaks included).
    allocator : bool
        Whether the script has the allocator options: every benchmark does; a script that
        creates no tensor (``render_readme.py``) does not.
    """
    made = argparse.ArgumentParser(
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if not allocator:
        return made
    made.add_argument(
        "--huge-pages",
        choices=("on", "off"),
        default=None,
        help="torch's huge-page CPU allocations (THP_MEM_ALLOC_ENABLE) for every contender "
        "(default: the environment's value, else on)",
    )
    made.add_argument(
        "--omp-wait-policy",
        choices=("active", "passive"),
        default=None,
        help="OMP_WAIT_POLICY of every contender (default: as in the environment; unset, "
        "each OpenMP runtime's own default)",
    )
    return made


def apply_allocator(args: argparse.Namespace) -> dict:
    """Set the run's allocator settings from ``args`` (:func:`harness.allocation.apply`):
    call once, after parsing and before the first tensor. Returns the settings."""
    return allocation.apply(
        getattr(args, "huge_pages", None), getattr(args, "omp_wait_policy", None)
    )


def chosen(names: str, known: tuple[str, ...], what: str = "contenders") -> list[str]:
    """The comma-separated ``names`` of a ``--contenders``-style option, each one of
    ``known``; exits naming the unknown ones and the known ones otherwise."""
    listed = [name for name in names.split(",") if name]
    unknown = sorted(set(listed) - set(known))
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; known: {', '.join(known)}")
    return listed


def sized_defaults(args: argparse.Namespace, defaults: dict[str, tuple]) -> argparse.Namespace:
    """Fill every option of ``defaults`` (name -> ``(quick value, full value)``) that the
    command line left at ``None``, from ``--quick`` or not."""
    for key, (small, full) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, small if args.quick else full)
    return args


def base_parser(
    description: str, epilog: str | None = None, sizes: dict | None = None, timed: bool = True
) -> argparse.ArgumentParser:
    """A parser with the options every benchmark shares (``None`` = "take the default").

    ``sizes`` replaces :data:`SIZES` in the help texts (a benchmark with other defaults);
    ``timed=False`` leaves out the options of interleaved timing and phase profiles
    (``--warmup``, ``--rounds``, ``--bw-mib``, ``--trace``).
    """
    d = (sizes or SIZES)["default"]
    q = (sizes or SIZES)["quick"]
    made = parser(description, epilog)
    add = made.add_argument
    add(
        "-n",
        "--num-embeddings",
        type=int,
        default=None,
        help=f"rows of the table (default {d['num_embeddings']:,}; "
        f"--quick {q['num_embeddings']:,})",
    )
    add(
        "-d",
        "--dim",
        type=int,
        default=None,
        help=f"embedding dimension D (default {d['dim']}; --quick {q['dim']})",
    )
    add(
        "-b",
        "--batch",
        type=int,
        default=None,
        help=f"ids per step, uniform with replacement, summed over all processes "
        f"(default {d['batch']:,}; --quick {q['batch']:,})",
    )
    if timed:
        add(
            "--warmup",
            type=int,
            default=None,
            help=f"untimed steps per contender first (default {d['warmup']})",
        )
    add("--steps", type=int, default=None, help=f"timed steps per contender (default {d['steps']})")
    if timed:
        add(
            "--rounds",
            type=int,
            default=None,
            help=f"the timed steps are split into this many interleaved rounds "
            f"(default {d['rounds']})",
        )
    add(
        "--loss",
        choices=sorted(LOSSES),
        default="upstream",
        help="loss on the looked-up rows, the same for every contender (default: upstream)",
    )
    add("--seed", type=int, default=0, help="seed of the ids (default 0)")
    if timed:
        add(
            "--bw-mib",
            type=int,
            default=None,
            help=f"size of each tensor of the copy-bandwidth probe in MiB (default {d['bw_mib']})",
        )
    _add_outputs(add, timed)
    return made


def _add_outputs(add, timed: bool) -> None:
    """``--quick``, ``--json`` and (``timed``) ``--trace`` of :func:`base_parser`."""
    add("--quick", action="store_true", help="small sizes and few steps (a smoke test, < 30 s)")
    add(
        "--json",
        metavar="PATH",
        default=None,
        help="also write the summary (the BENCH_SUMMARY line's JSON) to PATH",
    )
    if timed:
        add(
            "--trace",
            metavar="DIR",
            default=None,
            help="write the torch.profiler trace of every phase profile to DIR (Chrome trace "
            "JSON: chrome://tracing or https://ui.perfetto.dev)",
        )


def finish_args(args: argparse.Namespace, sizes: dict | None = None) -> argparse.Namespace:
    """Fill options left at ``None`` from the default or ``--quick`` sizes; check them."""
    chosen = (sizes or SIZES)["quick" if args.quick else "default"]
    for key, value in chosen.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    for key in ("num_embeddings", "dim", "batch", "steps", "rounds", "bw_mib"):
        if getattr(args, key) <= 0:
            raise SystemExit(
                f"--{key.replace('_', '-')} must be positive, got {getattr(args, key)}"
            )
    if args.warmup < 0:
        raise SystemExit(f"--warmup must be >= 0, got {args.warmup}")
    args.rounds = min(args.rounds, args.steps)
    return args


def profile_steps(args: argparse.Namespace) -> int:
    """Instrumented steps of a phase profile."""
    return max(2 if args.quick else 5, args.steps // 2)


def set_threads(threads: int | None) -> int:
    """``torch.set_num_threads(threads)`` unless ``None``; the thread count in effect."""
    if threads is not None:
        if threads <= 0:
            raise SystemExit(f"--threads must be positive, got {threads}")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def add_rank_options(parser: argparse.ArgumentParser, ranks_of: str) -> None:
    """``--world-size``, ``--threads-per-rank`` and ``--optimizer``: the options of a
    benchmark whose contenders run on gloo ranks (``ranks_of`` names them in the help);
    :func:`finish_rank_args` checks them."""
    parser.add_argument(
        "--world-size", type=int, default=2, help=f"ranks of {ranks_of} (default 2)"
    )
    parser.add_argument(
        "--threads-per-rank", type=int, default=1, help="threads of each rank (default 1)"
    )
    parser.add_argument(
        "--optimizer",
        choices=("adam", "adagrad"),
        default="adam",
        help="SparseAdam (default) or SparseAdagrad, for every contender",
    )


def finish_rank_args(
    parser: argparse.ArgumentParser, argv: list[str] | None, sizes: dict | None = None
) -> argparse.Namespace:
    """Parse ``argv`` with :func:`finish_args`; a parser error unless ``--world-size >= 2``."""
    args = finish_args(parser.parse_args(argv), sizes)
    if args.world_size < 2:
        parser.error(f"--world-size must be >= 2, got {args.world_size}")
    return args


def rank_config(args: argparse.Namespace, **entries) -> dict:
    """The summary's ``config`` of a benchmark with :func:`add_rank_options`: its sizes,
    ranks, threads, optimizer and timing, and the benchmark's own ``entries``."""
    return {
        "num_embeddings": args.num_embeddings,
        "dim": args.dim,
        "batch_total": args.batch,
        "world_size": args.world_size,
        "threads_per_rank": args.threads_per_rank,
        "optimizer": args.optimizer,
        "steps": args.steps,
        "loss": args.loss,
        "quick": args.quick,
        **entries,
    }


def add_timing_options(parser: argparse.ArgumentParser, *, warmup: int, rounds: int) -> None:
    """``--warmup`` and ``--rounds`` of interleaved timing, with these defaults, and
    ``--json``: for a benchmark with a parser of its own (not :func:`base_parser`)."""
    parser.add_argument(
        "--warmup", type=int, default=warmup, help=f"untimed steps per contender ({warmup})"
    )
    parser.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds ({rounds})")
    parser.add_argument("--json", default=None, help="also write the summary JSON here")


def parse_with_quick(
    parser: argparse.ArgumentParser, argv: list[str] | None, quick: dict
) -> argparse.Namespace:
    """Add ``--quick`` (a smoke test) to ``parser`` and parse ``argv``: with it, every option
    named in ``quick`` that the command line left at its default takes the quick value."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: " + ", ".join(f"{k}={v}" for k, v in quick.items()),
    )
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in quick.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    return args
