"""Who owns which row: pure index arithmetic, no processes involved.

A :class:`Partition` splits the ``num_embeddings`` rows of a table among ``num_parts`` owners
(ranks). Two rules are supported:

* ``remainder`` -- row ``i`` belongs to part ``i % num_parts`` (balanced, spreads hot
  low-numbered nodes over all parts; the default, as in DGL);
* ``blocks`` -- blocks of ``block_size`` consecutive rows dealt out in turn: row ``i``
  belongs to part ``(i // block_size) % num_parts`` (``remainder`` is ``block_size=1``).
  Balanced as ``remainder`` is, and a part's rows fill whole memory pages where all ranks
  share one table (what shared-memory storage uses);
* ``range`` -- part ``p`` owns the contiguous rows ``[boundaries[p], boundaries[p + 1])``;
  parts may have different sizes, including zero rows.

Every method works on CPU and CUDA tensors and returns tensors on the device of its input.

Example
-------
>>> import torch
>>> from graphemb import Partition
>>> part = Partition.range(10, [0, 4, 4, 10])   # part 1 owns no rows
>>> part.owner(torch.tensor([0, 3, 4, 9]))
tensor([0, 0, 2, 2])
>>> part.to_local(torch.tensor([5, 9]))
tensor([1, 5])
>>> part.local_size(2)
6
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from .._checks import as_size, is_integer_like

__all__ = ["Partition"]

_MODES = ("remainder", "blocks", "range")


class Partition:
    """Assignment of table rows to ``num_parts`` owners.

    Prefer the constructors :meth:`remainder`, :meth:`blocks` and :meth:`range`.

    Parameters
    ----------
    num_embeddings : int
        Number of rows of the table (any integer-like value: numpy integer, 0-d tensor).
    num_parts : int
        Number of owners (the world size of the process group that stores the table).
    mode : {"remainder", "blocks", "range"}
        The assignment rule.
    boundaries : sequence of int, optional
        For ``mode="range"``: ``num_parts + 1`` non-decreasing offsets, starting at 0 and
        ending at ``num_embeddings`` (a list, a numpy array or a 1-d integer tensor).
    block_size : int, optional
        For ``mode="blocks"``: the number of consecutive rows dealt to one part at a time.
    """

    def __init__(
        self,
        num_embeddings: int,
        num_parts: int,
        mode: str = "remainder",
        boundaries: Sequence[int] | torch.Tensor | None = None,
        block_size: int | None = None,
    ) -> None:
        num_embeddings = as_size("num_embeddings", num_embeddings, minimum=1)
        num_parts = as_size("num_parts", num_parts, minimum=1)
        if mode not in _MODES:
            raise ValueError(f"partition mode must be one of {_MODES}, got {mode!r}")
        if (mode == "range") != (boundaries is not None):
            raise ValueError(
                f"a {mode!r} partition "
                + ("needs boundaries" if mode == "range" else "takes no boundaries")
            )
        if (mode == "blocks") != (block_size is not None):
            raise ValueError(
                f"a {mode!r} partition "
                + ("needs a block_size" if mode == "blocks" else "takes no block_size")
            )
        self._num_embeddings = num_embeddings
        self._num_parts = num_parts
        self._mode = mode
        # remainder is the blocks rule with blocks of one row: one formula serves both
        self._block = 1 if block_size is None else as_size("block_size", block_size, minimum=1)
        self._boundaries: torch.Tensor | None = None
        if boundaries is not None:
            self._boundaries = _checked_boundaries(boundaries, num_embeddings, num_parts)
        # Cached copies of the boundaries per device (index math runs where the ids are).
        self._boundaries_on: dict[torch.device, torch.Tensor] = {}

    # ----------------------------------------------------------------- constructors
    @classmethod
    def remainder(cls, num_embeddings: int, num_parts: int) -> Partition:
        """Row ``i`` belongs to part ``i % num_parts``."""
        return cls(num_embeddings, num_parts, "remainder")

    @classmethod
    def blocks(cls, num_embeddings: int, num_parts: int, block_size: int) -> Partition:
        """Row ``i`` belongs to part ``(i // block_size) % num_parts``."""
        return cls(num_embeddings, num_parts, "blocks", block_size=block_size)

    @classmethod
    def range(  # noqa: A003 - the mode's name
        cls, num_embeddings: int, boundaries: Sequence[int] | torch.Tensor
    ) -> Partition:
        """Part ``p`` owns rows ``[boundaries[p], boundaries[p + 1])``.

        ``boundaries`` has ``num_parts + 1`` entries, starts at 0 and ends at
        ``num_embeddings``.
        """
        return cls(num_embeddings, len(boundaries) - 1, "range", boundaries)

    @classmethod
    def even_range(cls, num_embeddings: int, num_parts: int) -> Partition:
        """Contiguous parts of (almost) equal size, the first ones one row larger."""
        num_embeddings = as_size("num_embeddings", num_embeddings, minimum=1)
        num_parts = as_size("num_parts", num_parts, minimum=1)
        base, extra = divmod(num_embeddings, num_parts)
        sizes = [base + (1 if p < extra else 0) for p in range(num_parts)]
        return cls.range(num_embeddings, [0, *itertools.accumulate(sizes)])

    # ----------------------------------------------------------------- description
    @property
    def num_embeddings(self) -> int:
        """Number of rows ``N`` partitioned."""
        return self._num_embeddings

    @property
    def num_parts(self) -> int:
        """Number of parts, one per owning rank."""
        return self._num_parts

    @property
    def mode(self) -> str:
        """How rows map to parts.

        ``"remainder"``: row ``i`` in part ``i % num_parts``; ``"blocks"``: in part
        ``(i // block_size) % num_parts``; ``"range"``: contiguous parts between
        :attr:`boundaries`.
        """
        return self._mode

    @property
    def block_size(self) -> int | None:
        """Rows per block of a ``blocks`` partition (``None`` for the other modes)."""
        return self._block if self._mode == "blocks" else None

    @property
    def boundaries(self) -> list[int] | None:
        """Offsets of a ``range`` partition (``None`` for ``remainder``)."""
        return None if self._boundaries is None else self._boundaries.tolist()

    def local_size(self, part: int) -> int:
        """Number of rows owned by ``part``."""
        part = self._check_part(part)
        if self._boundaries is None:
            # whole rounds of num_parts blocks, then what part's block gets of the last one
            cycle = self._block * self._num_parts
            rounds, rest = divmod(self._num_embeddings, cycle)
            return rounds * self._block + min(self._block, max(0, rest - part * self._block))
        return int(self._boundaries[part + 1] - self._boundaries[part])

    def local_sizes(self) -> list[int]:
        """Rows owned by every part, in part order."""
        return [self.local_size(p) for p in range(self._num_parts)]

    # ----------------------------------------------------------------- index math
    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        """Part that owns each id.

        Parameters
        ----------
        ids : Tensor of int64, any shape
            Global row ids in ``[0, num_embeddings)``.

        Returns
        -------
        Tensor of int64, same shape and device as ``ids``.
        """
        if self._boundaries is None:
            blocks = ids if self._block == 1 else torch.div(ids, self._block, rounding_mode="floor")
            return torch.remainder(blocks, self._num_parts)
        inner = self._boundaries_for(ids.device)[1:-1]
        # Part p holds [b[p], b[p+1]): its index is the number of inner boundaries <= id.
        return torch.bucketize(ids, inner, right=True)

    def to_local(self, ids: torch.Tensor) -> torch.Tensor:
        """Index of each global id inside its owner's local rows."""
        if self._boundaries is None:
            if self._block == 1:
                return torch.div(ids, self._num_parts, rounding_mode="floor")
            rounds = torch.div(ids, self._block * self._num_parts, rounding_mode="floor")
            return rounds * self._block + torch.remainder(ids, self._block)
        starts = self._boundaries_for(ids.device)
        return ids - starts[self.owner(ids)]

    def to_global(self, local_ids: torch.Tensor, part: int) -> torch.Tensor:
        """Global ids of the local rows ``local_ids`` of ``part``."""
        part = self._check_part(part)
        if self._boundaries is None:
            if self._block == 1:
                return local_ids * self._num_parts + part
            rounds = torch.div(local_ids, self._block, rounding_mode="floor")
            offset = torch.remainder(local_ids, self._block)
            return (rounds * self._num_parts + part) * self._block + offset
        return local_ids + int(self._boundaries[part])

    def global_ids(self, part: int, device: torch.device | str | None = None) -> torch.Tensor:
        """All global ids owned by ``part``, in local order."""
        part = self._check_part(part)
        local = torch.arange(self.local_size(part), dtype=torch.int64, device=device)
        return self.to_global(local, part)

    # ----------------------------------------------------------------- comparison / io
    def to_dict(self) -> dict:
        """Plain description, e.g. for checkpoint metadata."""
        return {
            "mode": self._mode,
            "num_embeddings": self._num_embeddings,
            "num_parts": self._num_parts,
            "boundaries": self.boundaries,
            "block_size": self.block_size,
        }

    @classmethod
    def from_dict(cls, spec: dict) -> Partition:
        """The partition :meth:`to_dict` describes (``block_size`` may be absent)."""
        return cls(
            spec["num_embeddings"],
            spec["num_parts"],
            spec["mode"],
            spec["boundaries"],
            spec.get("block_size"),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(
            (self._mode, self._num_embeddings, self._num_parts, str(self.boundaries), self._block)
        )

    def __repr__(self) -> str:
        if self._mode == "blocks":
            return f"Partition.blocks({self._num_embeddings}, {self._num_parts}, {self._block})"
        if self._boundaries is None:
            return f"Partition.remainder({self._num_embeddings}, {self._num_parts})"
        return f"Partition.range({self._num_embeddings}, {self.boundaries})"

    # ----------------------------------------------------------------- helpers
    def _check_part(self, part: int) -> int:
        if not is_integer_like(part):
            raise ValueError(f"part must be an integer in [0, {self._num_parts}), got {part!r}")
        part = int(part)
        if not 0 <= part < self._num_parts:
            raise ValueError(f"part {part} out of range [0, {self._num_parts})")
        return part

    def _boundaries_for(self, device: torch.device) -> torch.Tensor:
        cached = self._boundaries_on.get(device)
        if cached is None:
            assert self._boundaries is not None  # only range partitions have boundaries
            cached = self._boundaries.to(device)
            self._boundaries_on[device] = cached
        return cached


def _checked_boundaries(
    boundaries: Sequence[int] | torch.Tensor, num_embeddings: int, num_parts: int
) -> torch.Tensor:
    if isinstance(boundaries, torch.Tensor) and (
        boundaries.is_floating_point() or boundaries.dtype == torch.bool
    ):
        raise ValueError(f"partition boundaries must be ints, got a tensor of {boundaries.dtype}")
    raw = boundaries.tolist() if isinstance(boundaries, torch.Tensor) else list(boundaries)
    if any(not is_integer_like(v) for v in raw):
        raise ValueError(f"partition boundaries must be ints (integer-like), got {raw}")
    values = [int(v) for v in raw]
    if len(values) != num_parts + 1:
        raise ValueError(
            f"a range partition of {num_parts} parts needs {num_parts + 1} boundaries, "
            f"got {len(values)}: {values}"
        )
    if values[0] != 0 or values[-1] != num_embeddings:
        raise ValueError(
            f"partition boundaries must start at 0 and end at num_embeddings={num_embeddings}, "
            f"got {values}"
        )
    if any(b < a for a, b in zip(values, values[1:], strict=False)):
        raise ValueError(f"partition boundaries must be non-decreasing, got {values}")
    return torch.tensor(values, dtype=torch.int64)
