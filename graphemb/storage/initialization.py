"""Filling new tables: by global row id, in chunks, in parallel.

An initialiser that learns which global rows it fills -- ``init(rows, ids)``, ``ids`` the
global ids of ``rows`` -- and fills each row from its id alone gives the same table on every
layout (one process, shared memory, partitions, machines: each fills only the rows it holds)
and may be run on chunks of a table, in parallel, with the same result as one call on the
whole table. :func:`fill_by_id` runs such an initialiser over a table in chunks on all
cores; :func:`uniform_by_id` is one, seeded, at memory speed.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

__all__ = [
    "RowsById",
    "copy_returned",
    "describe_ids",
    "fill_by_id",
    "table_initializer",
    "takes_ids",
    "uniform_by_id",
]

#: ``fill(rows, ids)``: fill ``rows`` (a slice of a table, shape (M, *row_shape)) in place;
#: ``ids`` (int64, (M,)) are their global row ids.
RowsById = Callable[[torch.Tensor, torch.Tensor], object]

# Rows drawn from one seeded stream by uniform_by_id (a multiple of it makes a chunk).
ROWS_PER_STREAM = 4096
# A chunk of a table filled by one task: large enough to amortise the task, small enough
# for every core to get several.
_CHUNK_BYTES = 16 << 20


def takes_ids(init: Callable) -> bool:
    """Whether ``init`` is called ``init(rows, ids)``: it has two required positional
    parameters (``torch.nn.init.uniform_(tensor, a=0, b=1)`` has one)."""
    try:
        parameters = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):  # no signature (some builtins): the one-argument form
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.kind in positional and p.default is p.empty]
    return len(required) >= 2


def copy_returned(result: object, rows: torch.Tensor, name: str = "it") -> None:
    """Copy what a fill function returned into the ``rows`` it was given: nothing to do for
    ``None`` or ``rows`` itself (filled in place), else a tensor of ``rows``' shape.

    Raises ``TypeError`` or ``ValueError`` (naming ``name``, the fill function, and the
    shapes) for anything else, before ``rows`` changes.
    """
    if result is None or result is rows:
        return
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"{name} must return a tensor or None, got {type(result).__name__}")
    if result.shape != rows.shape:
        raise ValueError(
            f"{name} returned shape {tuple(result.shape)} for rows of shape {tuple(rows.shape)}"
        )
    rows.copy_(result)


def fill_by_id(
    table: torch.Tensor,
    fill: RowsById,
    table_ids: Callable[[int, int], torch.Tensor],
    *,
    workers: int | None = None,
    zero_first: bool = False,
) -> None:
    """Run ``fill(table[start:stop], table_ids(start, stop))`` over chunks of ``table``.

    Large CPU tables are filled by ``workers`` threads at once (default: one per core), in
    chunks of a multiple of :data:`ROWS_PER_STREAM` rows. The result equals one call on the
    whole table for any ``fill`` that fills each row from its id alone. The first error is
    raised once every chunk is done.

    Parameters
    ----------
    table : Tensor (N, *row_shape)
        The table to fill in place.
    fill : callable
        ``fill(rows, ids)``, see :data:`RowsById`; may return a tensor of ``rows``' shape
        instead of filling in place (it is copied in).
    table_ids : callable
        ``table_ids(start, stop)``: the global ids (int64, (stop - start,)) of the table's
        rows ``start..stop``.
    workers : int, optional
        Threads to use (default: ``os.cpu_count()``).
    zero_first : bool
        Zero each chunk before ``fill`` sees it (for a table allocated uninitialised: the
        zeros are then written, and the pages first touched, in parallel).
    """
    rows = table.shape[0]
    row_bytes = max(1, math.prod(table.shape[1:]) * table.element_size())
    chunk = max(1, _CHUNK_BYTES // row_bytes // ROWS_PER_STREAM) * ROWS_PER_STREAM
    starts = range(0, rows, chunk)

    def fill_chunk(start: int) -> None:
        part = table[start : start + chunk]
        if zero_first:
            part.zero_()
        copy_returned(fill(part, table_ids(start, start + part.shape[0])), part)

    workers = workers or os.cpu_count() or 1
    if table.device.type != "cpu":
        for start in starts:
            fill_chunk(start)
        return
    # Worker threads also for one worker: measured on a busy 2-core machine, the same
    # chunks ran 10-40x slower in the main thread, whose torch ops wait on intra-op threads.
    with ThreadPoolExecutor(min(workers, len(starts)), thread_name_prefix="graphemb-init") as pool:
        futures = [pool.submit(fill_chunk, start) for start in starts]
    for future in futures:
        future.result()  # the first error, once every chunk is done


def uniform_by_id(low: float = 0.0, high: float = 1.0, *, seed: int = 0) -> RowsById:
    """An initialiser ``init(rows, ids)`` that fills row ``i`` with values uniform in
    ``[low, high]`` that depend on ``seed`` and ``i`` alone.

    So the table is the same on every layout and for every chunking (see the module
    docstring). Rows come in streams of :data:`ROWS_PER_STREAM` consecutive ids, each from
    its own generator seeded by ``(seed, id // ROWS_PER_STREAM)`` (numpy's SFC64: 32 random
    bits a value, 16 for 16-bit tables, scaled in float32 and rounded to the table's dtype,
    so ``high`` itself may occur after rounding; a table's values depend on its dtype).

    Examples
    --------
    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.storage.initialization import uniform_by_id
    >>> emb = NodeEmbedding(10, 4, "by-id", init_func=uniform_by_id(-0.1, 0.1, seed=7))
    >>> rows = torch.empty(3, 4)
    >>> uniform_by_id(-0.1, 0.1, seed=7)(rows, torch.tensor([2, 5, 9]))
    >>> torch.equal(rows, emb.weight[[2, 5, 9]])
    True
    """
    if not high >= low:
        raise ValueError(f"uniform_by_id needs low <= high, got low={low!r}, high={high!r}")

    def stream(index: int, rows: int, row_shape: tuple[int, ...], bits: int) -> torch.Tensor:
        """The first ``rows`` rows of stream ``index``, float32, ``bits`` random bits a
        value (16 or 32)."""
        count = rows * math.prod(row_shape)
        # Raw 64-bit draws cut into 16- or 32-bit values: 1.5-3x faster than
        # Generator.random (float32 draws).
        draws = np.random.SFC64([seed, index]).random_raw(-(-count // (64 // bits)))
        random = draws.view(np.uint16 if bits == 16 else np.uint32)[:count]
        values = np.empty(count, dtype=np.float32)
        # Scaled by numpy: single-threaded like the draws, which suits one stream per task
        # (torch's intra-op threads inside every worker thread oversubscribe the cores).
        np.multiply(random, np.float32((high - low) * 2.0**-bits), out=values, casting="unsafe")
        np.add(values, np.float32(low), out=values)
        return torch.from_numpy(values).view(rows, *row_shape)

    def fill(rows: torch.Tensor, ids: torch.Tensor) -> None:
        row_shape = tuple(rows.shape[1:])
        # 16 random bits are plenty for the 8 or 11 significant bits of bfloat16 / float16.
        bits = 16 if rows.element_size() <= 2 else 32
        ids = ids.cpu()
        if ids.numel() == 0:
            return
        first, last = int(ids[0]), int(ids[-1])
        if last - first + 1 == ids.numel() and bool((ids.diff() == 1).all()):
            # Consecutive ids: each stream's rows are one slice of rows.
            for index in range(first // ROWS_PER_STREAM, last // ROWS_PER_STREAM + 1):
                begin = max(first, index * ROWS_PER_STREAM)
                end = min(last + 1, (index + 1) * ROWS_PER_STREAM)
                values = stream(index, end - index * ROWS_PER_STREAM, row_shape, bits)
                rows[begin - first : end - first] = values[begin - index * ROWS_PER_STREAM :]
            return
        # Any ids (a partition's share): group them by stream.
        streams = ids // ROWS_PER_STREAM
        order = torch.argsort(streams, stable=True)
        indices, counts = torch.unique_consecutive(streams[order], return_counts=True)
        for index, members in zip(
            indices.tolist(), torch.split(order, counts.tolist()), strict=True
        ):
            offsets = ids[members] - index * ROWS_PER_STREAM
            values = stream(index, int(offsets.max()) + 1, row_shape, bits)
            rows[members.to(rows.device)] = values[offsets].to(rows.device, rows.dtype)

    return fill


def describe_ids(ids: torch.Tensor, limit: int = 6) -> str:
    """Short description of a set of row ids: ``'rows 0..149'`` or ``'150 rows 0, 2, 4, ...,
    298'``."""
    count = ids.numel()
    if count == 0:
        return "no rows"
    first, last = int(ids[0]), int(ids[-1])
    if last - first + 1 == count and bool((ids.diff() == 1).all()):
        return f"rows {first}..{last}"
    shown = ", ".join(str(i) for i in ids[:limit].tolist())
    return f"{count} rows {shown}{', ..., ' + str(last) if count > limit else ''}"


def table_initializer(
    init_func: Callable[..., Any], name: str, storage: Any
) -> Callable[[torch.Tensor], None]:
    """``init(table)`` for ``storage.create_table``: ``init_func`` run on the rows this
    process creates (see ``init_func`` in :class:`NodeEmbedding`), its failure an error
    naming the layout, the rows and the way to copy in a full table."""
    by_id = takes_ids(init_func)

    def init(table: torch.Tensor) -> None:
        try:
            if by_id:  # row by row from the ids: in chunks, in parallel
                fill_by_id(table, init_func, storage.table_ids, zero_first=by_id)
                return
            copy_returned(init_func(table), table, "init_func")
        except Exception as err:
            rows = describe_ids(storage.table_ids())
            whole = table.shape[0] == storage.num_embeddings
            message = (
                f"NodeEmbedding {name!r}: init_func{'(table, ids)' if by_id else '(table)'} "
                f"failed on a table of shape {tuple(table.shape)} ({storage.kind} layout, "
                f"{'every row' if whole else 'this share only'}: global {rows} of "
                f"{storage.num_embeddings}): {type(err).__name__}: {err}. "
                "init_func(table, ids) learns the global row ids of the rows it fills; to "
                "copy in a prepared full table, create the embedding without init_func and "
                "call all_set_embedding(values) on every rank"
            )
            raise (TypeError if isinstance(err, TypeError) else ValueError)(message) from err

    # Local and partitioned tables may then be allocated uninitialised (see fill_by_id).
    init.zeroes_rows = by_id  # type: ignore[attr-defined]
    return init
