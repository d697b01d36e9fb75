"""Robert Floyd's algorithm vectorised over rows: the draws of the pure-torch sampler.

:func:`distinct_offsets` draws ``k`` distinct uniform offsets below each row's degree in
``k`` rounds of light tensor passes over all rows (see its docstring); the cost per row
is ``O(k)`` random numbers whatever the degree is.
"""

from __future__ import annotations

import torch

from ._pieces import add_column, flatnonzero

__all__ = ["distinct_offsets"]

# A row's taken offsets fit in the bits of one int64 while its degree is at most 64.
_BITSET_DEGREE = 64


def distinct_offsets(
    degree: torch.Tensor, k: int, generator: torch.Generator | None, base: torch.Tensor
) -> torch.Tensor:
    """``base[r] + o`` for ``k`` distinct uniform offsets ``o`` in ``[0, degree[r])`` of
    every row ``r`` (all ``degree >= k``), shape (R, k), row-major.

    Floyd's algorithm: in round ``i``, for ``j = d - k + i``, draw ``t`` uniform in
    ``[0, j]`` and take ``t`` unless it was taken already, else ``j`` (which cannot have
    been). Every k-subset comes out with probability ``1 / C(d, k)``; the order within a
    row is not uniform. Rows of degree <= 64 keep their taken set as the bits of an int64
    (O(k) per row); larger degrees compare with the earlier rounds (O(k**2) per row).
    """
    rows = degree.numel()
    device = degree.device
    out = torch.empty((rows, k), dtype=torch.int64, device=device)
    for columns in _serial_chunks(rows, device):
        part_degree = degree[columns]
        chosen = torch.empty((k, part_degree.numel()), dtype=torch.int64, device=device)
        low, high = (int(v) for v in torch.aminmax(part_degree))
        if high <= _BITSET_DEGREE:
            _floyd_bitset(chosen, part_degree, generator)
        elif low > _BITSET_DEGREE:
            _floyd_compare(chosen, part_degree, generator)
        else:
            small = part_degree <= _BITSET_DEGREE
            for rows_of, floyd in ((small, _floyd_bitset), (~small, _floyd_compare)):
                index = flatnonzero(rows_of)
                some = torch.empty((k, index.numel()), dtype=torch.int64, device=device)
                floyd(some, part_degree.index_select(0, index), generator)
                chosen.index_copy_(1, index, some)
        # transpose to row-major while the chunk is still in cache
        add_column(out[columns], chosen.t(), base[columns])
    return out


def _floyd_bitset(
    chosen: torch.Tensor, degree: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Floyd's rounds into ``chosen`` (k, R) for degrees <= 64, the taken set as the bits
    of an int64 per row."""
    k, rows = chosen.shape
    # Three rounds per random float64: a round's draw floor(u * (j + 1)) uses at most 6 of
    # u's 53 random bits, and frac(u * (j + 1)) is again uniform on [0, 1), to 2**-47; the
    # third draw is uniform to ~2**-35. (The generator is the slowest step on CPU.)
    draws = torch.rand(
        (-(-k // 3), rows), dtype=torch.float64, device=chosen.device, generator=generator
    )
    one = torch.ones((), dtype=torch.int64, device=chosen.device)
    taken = torch.zeros(rows, dtype=torch.int64, device=chosen.device)
    size = degree.to(torch.float64)
    for i in range(k):
        u = draws[i // 3]
        t = _floyd_draw(chosen, u, size, i)
        if i % 3 != 2:
            u.frac_()
        if i:
            clash = torch.bitwise_right_shift(taken, t).bitwise_and_(1).bool()
            torch.where(clash, degree + (i - k), t, out=t)
        if i < k - 1:
            taken.bitwise_or_(torch.bitwise_left_shift(one, t))


def _floyd_compare(
    chosen: torch.Tensor, degree: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Floyd's rounds into ``chosen`` (k, R) for any degree, comparing with the earlier
    rounds; one random float64 per round (53 bits: uniform to ~2**-40 for any degree)."""
    k, rows = chosen.shape
    draws = torch.rand((k, rows), dtype=torch.float64, device=chosen.device, generator=generator)
    size = degree.to(torch.float64)
    for i in range(k):
        t = _floyd_draw(chosen, draws[i], size, i)
        if i:
            clash = (chosen[:i] == t).any(0)
            torch.where(clash, degree + (i - k), t, out=t)


def _floyd_draw(chosen: torch.Tensor, u: torch.Tensor, size: torch.Tensor, i: int) -> torch.Tensor:
    """Round ``i``'s draw, ``floor(u * (j + 1))`` uniform in ``[0, j]``, written to
    ``chosen[i]`` and returned; ``u`` becomes ``u * (j + 1)``."""
    t = chosen[i]
    # u < 1, so u * (j + 1) < j + 1 exactly; the cast truncates (floor for u >= 0)
    t.copy_(u.mul_(size + (i - chosen.shape[0] + 1)))
    return t


# Floyd's rounds are many light passes over the rows. On CPU they run on chunks small
# enough for torch to keep each pass on the calling thread: a pass split over threads ends
# in a barrier, and when another process holds a core every barrier waits for the
# scheduler (measured: ~10x slower per pass on 2 busy cores). GPUs take all rows at once.
_SERIAL_ROWS = 16384


def _serial_chunks(rows: int, device: torch.device) -> list[slice]:
    step = rows if device.type == "cuda" else _SERIAL_ROWS
    return [slice(begin, begin + step) for begin in range(0, rows, max(step, 1))]
