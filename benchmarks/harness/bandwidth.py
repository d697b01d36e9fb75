"""The memory-bandwidth bound: bytes an update must move / measured copy bandwidth."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import workload
from .timing import median, time_steps

# Bytes an update must move per unique row and per column, float32 everywhere:
#   Adam:    read + write weight, exp_avg, exp_avg_sq (6 x 4) + read the gradient (4) = 28
#   Adagrad: read + write weight, sum (4 x 4)             + read the gradient (4) = 20
#   row-wise Adagrad: read + write weight (2 x 4)         + read the gradient (4) = 12
# (Adam's per-row int64 step count and row-wise Adagrad's per-row sum, 16 and 8 bytes per
# row, are left out: they do not grow with D.)
UPDATE_BYTES_PER_COLUMN = {"adam": 28, "adagrad": 20, "rowwise_adagrad": 12}


def copy_bandwidth(mib: int = 256, repeats: int = 9, device: torch.device | str = "cpu") -> dict:
    """Memory bandwidth from ``dst.copy_(src)`` of two preallocated ``mib`` MiB tensors:
    ``2 * bytes / time`` (one read and one write per byte), best and median of ``repeats``."""
    device = torch.device(device)
    nbytes = mib << 20
    times = _copy_times(nbytes, repeats, device)
    rates = [2 * nbytes / t for t in times]
    # The bound uses the fastest copy: on a shared machine other processes only ever slow a
    # copy down, so the best of several is the steadiest estimate of what the memory can do
    # (the median is reported beside it).
    return {
        "bytes_per_s": max(rates),
        "median_bytes_per_s": median(rates),
        "min_bytes_per_s": min(rates),
        "tensor_mib": mib,
        "repeats": repeats,
        "device": str(device),
        "threads": torch.get_num_threads(),
    }


def _copy_times(nbytes: int, repeats: int, device: torch.device) -> list[float]:
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)  # both touched: no page faults inside the timing
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    dst.copy_(src)
    return time_steps(lambda _: dst.copy_(src), 0, repeats, sync)


def update_bytes(optimizer: str, dim: int, unique_rows: float) -> float:
    """Bytes an update of ``unique_rows`` rows of width ``dim`` must move."""
    return UPDATE_BYTES_PER_COLUMN[optimizer] * dim * unique_rows


def bound_ms(optimizer: str, dim: int, unique_rows: float, bandwidth: dict) -> float:
    """Time to move the bytes an update must move at the measured copy bandwidth."""
    return 1e3 * update_bytes(optimizer, dim, unique_rows) / bandwidth["bytes_per_s"]


def fmt_bw(bandwidth: dict) -> str:
    return (
        f"{bandwidth['bytes_per_s'] / 1e9:.1f} GB/s, best of {bandwidth['repeats']} "
        f"(median {bandwidth['median_bytes_per_s'] / 1e9:.1f}, slowest "
        f"{bandwidth['min_bytes_per_s'] / 1e9:.1f}) = 2 x bytes / time of dst.copy_(src), "
        f"2 x {bandwidth['tensor_mib']} MiB, {bandwidth['device']}, "
        f"{bandwidth['threads']} threads"
    )


def print_rank_bound(args, batches: Sequence[torch.Tensor]) -> tuple[float, dict, float]:
    """Unique rows of the global ``batches``, the copy bandwidth and the update's bound of a
    run on ``args.world_size`` ranks, printed; returns ``(unique_rows, bandwidth, bound_ms)``."""
    n, b, ws = args.num_embeddings, args.batch, args.world_size
    unique = workload.mean_unique(batches)
    print(
        f"unique rows per (total) batch: expected {workload.expected_unique(n, b):,.0f}, "
        f"measured {unique:,.0f}; each of {ws} ranks looks up {b // ws:,} ids"
    )
    bandwidth = copy_bandwidth(args.bw_mib)
    bound = bound_ms(args.optimizer, args.dim, unique, bandwidth)
    print(f"copy bandwidth: {fmt_bw(bandwidth)}")
    print(
        f"bound: {UPDATE_BYTES_PER_COLUMN[args.optimizer]}*D bytes x {unique:,.0f} unique rows "
        f"-> {bound:.2f} ms per step"
    )
    return unique, bandwidth, bound
