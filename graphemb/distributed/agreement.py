"""Cross-rank failure agreement for work done in phases (a checkpoint's save or load).

Each phase ends with an agreement through the job's store: a failure on any one rank -- of
any exception type -- makes every rank raise at once, the failed rank its own error and the
others an error of the same built-in type naming the failed rank and its message
(:meth:`graphemb.distributed.coordination.Coordinator.agree`). Ranks that work in lockstep
rounds end each round with a one-value all-reduce (:meth:`PhaseAgreement.vote`); ranks that
work on their own poll the store between pieces of work (:meth:`PhaseAgreement.check_peers`).
So nobody works on for long after a peer failed, and nobody waits for a rank that raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .coordination import Coordinator
from .exchange import Exchange

__all__ = ["PhaseAgreement", "PeerFailed"]

T = TypeVar("T")


class PeerFailed(Exception):
    """Another rank failed the current phase: stop; the agreement raises its error."""


@dataclass
class PhaseAgreement:
    """The phases of one collective job, agreed on by every rank.

    Parameters
    ----------
    coordinator : Coordinator or None
        The job's store (``None``: one process, nothing to agree on).
    exchange : Exchange or None
        Collectives of the ranks taking part, for the votes of lockstep rounds.
    rank, world_size : int
        This rank and the number of ranks.
    key : str
        Store prefix of this job, unique per job (see
        :meth:`~graphemb.distributed.coordination.Coordinator.next_generation`).
    label : str
        What the job is, for messages (``"checkpoint"``).
    """

    coordinator: Coordinator | None
    exchange: Exchange | None
    rank: int
    world_size: int
    key: str
    label: str

    def run(self, phase: str, work: Callable[[], T]) -> T:
        """This rank's part of ``phase``, then the agreement: every rank raises if any rank
        failed, whatever the exception (a rank that raised alone would leave the others
        waiting until the timeout)."""
        result, error = None, None
        try:
            result = work()
        except PeerFailed:
            pass  # the agreement raises the peer's error
        except BaseException as err:  # noqa: B036 - reported to the others, then re-raised
            error = err
        if self.coordinator is None:
            if error is not None:
                raise error
        else:
            self.coordinator.agree(f"{self.key}/{phase}", error, f"{self.label} {phase}")
        return result  # type: ignore[return-value]

    def check_peers(self, phase: str) -> None:
        """Raise :class:`PeerFailed` if another rank already failed ``phase``."""
        if self.coordinator is not None and self.coordinator.failed(f"{self.key}/{phase}"):
            raise PeerFailed

    def vote(self, error: BaseException | None, operation: str) -> None:
        """End of a lockstep round: stop on every rank if it failed on any."""
        failed = error is not None
        if self.exchange is not None:
            failed = self.exchange.true_on_any_rank(failed, f"{operation} (failure vote)")
        if error is not None:
            raise error
        if failed:
            raise PeerFailed

    def share(self, phase: str, document: dict | None) -> dict:
        """Rank 0's ``document`` on every rank."""
        if self.coordinator is None:
            return document  # type: ignore[return-value]
        key = f"{self.key}/{phase}/document"
        if self.rank == 0:
            self.coordinator.publish(key, document)  # type: ignore[arg-type]
            return document  # type: ignore[return-value]
        return self.coordinator.read(key, f"rank 0's {self.label} {phase}")

    def broadcast_bytes(self, data: bytes | None, operation: str) -> bytes:
        """Rank 0's ``data`` on every rank."""
        if self.exchange is None:
            return data  # type: ignore[return-value]
        return self.exchange.broadcast_bytes(data, 0, operation)
