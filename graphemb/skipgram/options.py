"""What a DeepWalk / node2vec run does (:class:`SkipGramOptions`, the same for every
backend), which backend trains it (:class:`Backend`), and what only one backend needs
(:class:`CompiledOptions`, :class:`TorchOptions`).

Every value is checked once, here, when a run starts (:meth:`SkipGramOptions.checked`,
:func:`parse_backend`): a bad one raises ``ValueError`` naming the option and the value,
before any walk is drawn.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from .._checks import as_size

__all__ = [
    "Backend",
    "CompiledOptions",
    "SkipGramOptions",
    "TorchOptions",
    "parse_backend",
]


@dataclasses.dataclass(frozen=True)
class SkipGramOptions:
    """DeepWalk / node2vec, trained the word2vec way.

    ``num_walks`` walks of ``walk_length`` nodes start from every node each epoch
    (node2vec's biased walks when ``p`` or ``q`` differ from 1); frequent nodes are
    subsampled, a reduced window of 1 to ``window`` positions is drawn per position, and
    every (context, node) pair is trained against ``negatives`` noise nodes drawn from
    ``frequency ** 0.75`` by plain SGD, whose learning rate falls linearly from ``lr`` to
    ``lr / 250`` over the run.

    Attributes
    ----------
    dimensions : int
        Size ``D`` of every embedding row.
    walk_length : int
        Nodes per walk (a walk of ``walk_length`` nodes takes ``walk_length - 1`` steps), as
        the reference implementations' ``--walk-length``.
    num_walks : int
        Walks started from every node per epoch.
    window : int
        Largest distance between a node and a context node of its walk (word2vec's
        ``window``).
    p, q : float
        node2vec's return and in-out parameters (1 and 1: DeepWalk's uniform walks).
    weighted : bool
        Walks step along an edge in proportion to its weight (``graph.edge_weight``); node
        frequencies (subsampling, noise) then count weights too.
    negatives : int
        Noise nodes per (context, node) pair (word2vec's ``negative``).
    epochs : int
        Rounds of fresh walks: each draws ``num_walks`` new walks from every node.
    passes : int
        SGD passes over the same walks (the reference node2vec's ``--iter``, gensim's
        ``epochs``): each chunk of walks is trained ``passes`` times in a row, with fresh
        subsampling and noise each time, before the next chunk is drawn.
    sample : float
        Subsampling threshold (gensim's ``sample``; 0 keeps every node): a node whose share
        ``f`` of all walk positions exceeds it is kept with probability
        ``(sqrt(f / sample) + 1) * sample / f``.
    lr : float
        Initial learning rate (word2vec's ``alpha``).
    seed : int
        Seeds the initial rows, the walks, the subsampling and the noise.
    chunk_walks : int
        Walks drawn at once and trained before the next are drawn: memory holds one chunk
        (``chunk_walks * walk_length`` ids), whatever the graph's size or ``num_walks``.
    """

    dimensions: int = 128
    walk_length: int = 80
    num_walks: int = 10
    window: int = 10
    p: float = 1.0
    q: float = 1.0
    weighted: bool = False
    negatives: int = 5
    epochs: int = 1
    passes: int = 1
    sample: float = 1e-3
    lr: float = 0.025
    seed: int = 0
    chunk_walks: int = 8192

    def replace(self, **changes: Any) -> SkipGramOptions:
        """A copy with ``changes``; an unknown name raises ``TypeError`` naming it."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(
                f"unknown skip-gram option(s) {unknown}; the options are "
                f"{[f.name for f in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)

    def checked(self) -> SkipGramOptions:
        """These options with every value checked (sizes as ints); ``ValueError`` names the
        first bad one."""
        sizes: dict[str, Any] = {
            name: as_size(name, getattr(self, name), minimum=minimum)
            for name, minimum in (
                ("dimensions", 1),
                ("walk_length", 2),
                ("num_walks", 1),
                ("window", 1),
                ("negatives", 1),
                ("epochs", 1),
                ("passes", 1),
                ("seed", 0),
                ("chunk_walks", 1),
            )
        }
        for name in ("p", "q", "lr"):
            _check_positive(name, getattr(self, name))
        sample = self.sample
        if (
            isinstance(sample, bool)
            or not isinstance(sample, (int, float))
            or not (math.isfinite(sample) and sample >= 0)
        ):
            raise ValueError(f"sample must be a number >= 0, got {sample!r}")
        if not isinstance(self.weighted, bool):
            raise ValueError(f"weighted must be True or False, got {self.weighted!r}")
        floats: dict[str, Any] = {n: float(getattr(self, n)) for n in ("p", "q", "lr", "sample")}
        return dataclasses.replace(self, **sizes, **floats)


def _check_positive(name: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


class Backend(enum.Enum):
    """Which code trains the rows.

    ``COMPILED``: word2vec's own algorithm in C++ -- one (context, node) pair at a time, in
    lock-free threads -- on CPU graphs (needs the compiled kernels). ``TORCH``: the same
    updates in batched torch operations, on any device (CUDA, and CPUs without the
    compiled kernels). ``AUTO``: the compiled backend where it can run, else torch.
    """

    AUTO = "auto"
    COMPILED = "compiled"
    TORCH = "torch"


def parse_backend(value: Backend | str) -> Backend:
    """``value`` as a :class:`Backend` (its name or the member itself)."""
    if isinstance(value, Backend):
        return value
    try:
        return Backend(value)
    except ValueError:
        names = [member.value for member in Backend]
        raise ValueError(f"backend must be one of {names}, got {value!r}") from None


NOISE_POOL_BYTES = 256 * 1024
"""Bytes of output rows in a thread's pool of noise nodes (:class:`CompiledOptions`): a
quarter of a 1 MiB second-level cache, which also holds the rows of the walk being trained."""

FRESH_NOISE_TABLE_BYTES = 32 * 1024 * 1024
"""Largest output table (``num_nodes * dimensions`` float32s) whose noise nodes are all fresh
draws by default (:attr:`CompiledOptions.noise_reuse` None): about what a CPU's shared
last-level cache keeps of it, so that a fresh draw's row seldom waits on memory."""

LARGE_TABLE_NOISE_REUSE = 10
"""Noise nodes per fresh draw, by default, for an output table larger than
:data:`FRESH_NOISE_TABLE_BYTES`."""


OUTPUT_DTYPES = ("float32", "float24", "bfloat16")
"""The output table's types (:attr:`CompiledOptions.output_dtype`)."""


@dataclasses.dataclass(frozen=True)
class CompiledOptions:
    """What only the compiled backend takes.

    Attributes
    ----------
    vector_width : {0, 4, 8}
        Floats per vector operation of the kernel's loop: 0 the widest this CPU runs (8 with
        AVX2 and FMA), 4 or 8 that one. Both give word2vec's updates; 8 adds the products
        in another order.
    sharing : {"pair", "position"}
        Which contexts share a draw of ``negatives`` noise nodes. ``"pair"`` (word2vec's
        algorithm) draws them for every (context, node) pair. ``"position"`` draws them once
        per walk position for all the contexts of its window (HogBatch, as in BlazingText):
        a window then reads about ``negatives`` noise rows from memory instead of about
        ``window * negatives``, which is most of the cost per token once the tables no longer
        fit the caches; every pair is still trained in word2vec's order.
    noise_reuse : int or None
        Noise nodes served by each fresh draw of the noise distribution. 1 (word2vec):
        every noise node is a fresh draw, a random row of the output table. Above 1, each
        thread takes its noise nodes from a pool of recent fresh draws (their rows,
        :data:`NOISE_POOL_BYTES` in all, stay in the core's cache), putting a fresh draw
        into it before every ``noise_reuse``-th: each noise node still follows the noise
        distribution, and a table larger than the caches is read about ``noise_reuse``
        times less often for noise rows; the price is that a pooled node serves about
        ``noise_reuse`` pairs close together in time instead of one. None (the default):
        1 for an output table of at most :data:`FRESH_NOISE_TABLE_BYTES`, whose fresh
        draws mostly hit the cache, else :data:`LARGE_TABLE_NOISE_REUSE`, since beyond the
        caches each fresh draw is a read from memory, and a walk position takes about
        ``(window + 1) * negatives`` of them (see :meth:`for_table`).
    output_dtype : {"float32", "float24", "bfloat16"}
        The output table's type (word2vec's ``syn1``; the input rows, the embeddings, stay
        float32). ``"float24"`` (a float32 less its lowest 8 significand bits) holds it in
        3/4 of the memory, ``"bfloat16"`` in half, for graphs whose float32 tables do not
        fit: each row is read into float32, trained with the same arithmetic, and written
        back rounded stochastically (up or down with the probabilities that make it exact
        on average), so that updates smaller than a step still add up. Each write still
        adds noise of up to a step (2^-15 of the value in float24, 2^-7 in bfloat16), and
        the conversions cost time: on the DeepWalk benchmarks bfloat16 scores lower than
        float32, and both narrow types train slower (``docs/guides/deepwalk.md``).
    """

    vector_width: int = 0
    sharing: str = "pair"
    noise_reuse: int | None = None
    output_dtype: str = "float32"

    def checked(self) -> CompiledOptions:
        if self.vector_width not in (0, 4, 8):
            raise ValueError(
                f"vector_width must be 0 (the widest), 4 or 8, got {self.vector_width!r}"
            )
        if self.sharing not in ("pair", "position"):
            raise ValueError(f"sharing must be 'pair' or 'position', got {self.sharing!r}")
        if self.noise_reuse is not None:
            as_size("noise_reuse", self.noise_reuse, minimum=1)
        if self.output_dtype not in OUTPUT_DTYPES:
            raise ValueError(
                f"output_dtype must be one of {list(OUTPUT_DTYPES)}, got {self.output_dtype!r}"
            )
        return self

    def for_table(self, num_nodes: int, dimensions: int) -> CompiledOptions:
        """These options for an output table of ``num_nodes`` rows of ``dimensions`` floats:
        ``noise_reuse`` None replaced by its value for that table (see the class)."""
        if self.noise_reuse is not None:
            return self
        fits = 4 * num_nodes * dimensions <= FRESH_NOISE_TABLE_BYTES
        return dataclasses.replace(self, noise_reuse=1 if fits else LARGE_TABLE_NOISE_REUSE)

    def noise_pool(self, dimensions: int) -> int:
        """Slots of each thread's pool of noise nodes for rows of ``dimensions`` floats: 0
        without reuse, else as many rows as :data:`NOISE_POOL_BYTES` hold (at least 64).
        ``noise_reuse`` must be set (:meth:`for_table`)."""
        if self.noise_reuse is None:
            raise ValueError("noise_reuse is None: resolve it with for_table(num_nodes, dim)")
        if self.noise_reuse == 1:
            return 0
        return max(64, NOISE_POOL_BYTES // (4 * dimensions))


@dataclasses.dataclass(frozen=True)
class TorchOptions:
    """What only the torch backend takes.

    Attributes
    ----------
    step_tokens : int or None
        Walk positions trained per step, over all ranks. None: in one process, the graph's
        nodes divided by ``negatives``, so that within a round each row is drawn as a noise
        node about once (noise rows drawn twice in a round add both updates, computed from
        the row's old value); on several ranks, ``max_round_pairs`` per rank, since every
        round is then an exchange between the ranks. Each step trains its pairs in
        ``2 * window`` rounds in which no input or output row of a walk position is updated
        twice (see :mod:`graphemb.skipgram.backends.batched`).
    max_round_pairs : int
        Pairs per round at most (memory: a round holds ``pairs * (negatives + 1) * D``
        floats, three times over), which caps ``step_tokens`` on large graphs.
    """

    step_tokens: int | None = None
    max_round_pairs: int = 1 << 15

    def checked(self) -> TorchOptions:
        if self.step_tokens is not None:
            as_size("step_tokens", self.step_tokens, minimum=1)
        as_size("max_round_pairs", self.max_round_pairs, minimum=1)
        return self
