"""Training never hands out rows that blew up: :class:`TrainingDiverged` and the checks that
raise it (non-finite scores or rows, and row norms past :data:`MAX_ROW_NORM`)."""

from __future__ import annotations

import torch

__all__ = ["MAX_ROW_NORM", "TrainingDiverged", "check_rows", "diverged"]

MAX_ROW_NORM = 1e4
"""The largest L2 norm a trained row may have. Healthy skip-gram rows stay near 1 to 10:
once a pair's score is large its gradient vanishes (the sigmoid saturates); rows far past
this bound are the mark of a learning rate too high for the graph."""

# Rows checked at a time: their norms and marks (10 KiB) fit in the allocator's free memory,
# so that the check adds nothing to the peak of a run that still holds its two tables.
_CHECK_ROWS = 1 << 11


class TrainingDiverged(ValueError):
    """Training produced a non-finite score or a row past :data:`MAX_ROW_NORM` (the
    learning rate is too high for the graph): the run stops rather than return or write
    such rows."""


def diverged(where: str, what: str, lr: float) -> TrainingDiverged:
    """The error of a run that diverged ``where`` (e.g. "in walk chunk 3 of 10")."""
    return TrainingDiverged(
        f"skip-gram training diverged {where}: {what} (initial lr {lr:g}); lower lr"
    )


def check_rows(rows: torch.Tensor, lr: float, where: str) -> None:
    """Raise :class:`TrainingDiverged` naming the first row of ``rows`` (N, D) that is not
    finite or whose norm exceeds :data:`MAX_ROW_NORM`; checked a block of rows at a time."""
    for first in range(0, rows.shape[0], _CHECK_ROWS):
        block = rows[first : first + _CHECK_ROWS]
        norms = torch.linalg.vector_norm(block.float(), dim=1)
        bad = ~(norms <= MAX_ROW_NORM)  # NaN compares False: caught too
        if bool(bad.any()):
            row = int(bad.nonzero()[0])
            norm = float(norms[row])
            what = (
                f"embedding row {first + row} is not finite"
                if not torch.isfinite(block[row]).all()
                else f"embedding row {first + row} has norm {norm:.3g} > {MAX_ROW_NORM:g}"
            )
            raise diverged(where, what, lr)
