"""word2vec's skip-gram with negative sampling over random walks, compiled: Hogwild
threads updating the two tables in place (the compiled backend of
:mod:`graphemb.skipgram`)."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from ctypes import c_double, c_int64, c_uint64, c_void_p

import torch

from .library import library, span
from .tensors import dtype_name

__all__ = ["SHARING", "SkipGramTrainer", "SlotNoise", "float24_width"]

_MASK64 = (1 << 64) - 1


class _Config(ctypes.Structure):
    """``ge_skipgram_config`` of ``csrc/graphemb_kernels.h``, field for field."""

    _fields_ = [
        ("walks", c_void_p),
        ("num_walks", c_int64),
        ("length", c_int64),
        ("syn0", c_void_p),
        ("syn1", c_void_p),
        ("num_nodes", c_int64),
        ("dim", c_int64),
        ("count_indptr", c_void_p),
        ("count_values", c_void_p),
        ("subsample_threshold", c_double),
        ("noise_node", c_void_p),
        ("noise_keep", c_void_p),
        ("noise_alias", c_void_p),
        ("noise_columns", c_int64),
        ("noise_slots", c_void_p),
        ("noise_slot_count", c_int64),
        ("noise_floor", c_double),
        ("noise_alias_share", c_double),
        ("noise_lack_bound", c_double),
        ("window", c_int64),
        ("negatives", c_int64),
        ("lr", c_double),
        ("final_rate", c_double),
        ("walks_before", c_int64),
        ("total_walks", c_int64),
        ("hold_walks", c_int64),
        ("threads", c_int64),
        ("seed", c_uint64),
        ("vector_width", c_int64),
        ("sharing", c_int64),
        ("noise_pool", c_int64),
        ("noise_reuse", c_int64),
        ("syn1_format", c_int64),
    ]


#: ``sharing`` of :class:`SkipGramTrainer` and its code in ``ge_skipgram_config``.
SHARING = {"pair": 0, "position": 1}

#: The output rows' formats by the dtype of ``syn1``: their ``syn1_format`` codes.
_SYN1_FORMATS = {torch.float32: 0, torch.bfloat16: 1, torch.uint8: 2}


@dataclasses.dataclass(frozen=True)
class SlotNoise:
    """The noise distribution ``count ** 0.75`` read mostly from a graph's neighbour lists
    (``csrc/skipgram/tables.h``): every node ``v`` appears ``count(v)`` times in ``slots``
    (once per in-edge), so a uniform slot draws ``v`` in proportion to its count; the kernel
    accepts it with probability ``min(1, (floor / count(v)) ** 0.25)``, which gives every
    node of count at least ``floor`` its share of ``count ** 0.75``. What the nodes below
    ``floor`` lack, ``lack(c) = c ** 0.75 * floor ** 0.25 - c``, is drawn instead of the
    slots with probability ``alias_share``: from a small alias table, or by rejection from
    uniform nodes (``lack_bound > 0``: a node of count ``c`` in ``(0, floor)`` accepted with
    probability ``lack(c) / lack_bound``). No array of N entries is built.

    Attributes
    ----------
    slots : Tensor of int64 (E,)
        Node ids in ``[0, num_nodes)``, checked once here (the kernel, called once per
        chunk of walks, does not read them all again).
    floor : float
        The count from which slot draws are thinned (> 0).
    num_nodes : int
        Nodes of the tables.
    alias : tuple of Tensor
        ``(nodes, keep, alias)`` (int64, float64, int64, each (C,)): the alias table of
        what the nodes below ``floor`` lack; empty (C = 0) when ``alias_share`` is 0 or
        ``lack_bound`` above 0.
    alias_share : float
        The probability of a draw below the floor, in [0, 1).
    lack_bound : float
        0: draws below the floor come from ``alias``. Above 0: by rejection, at least
        ``lack(c)`` for every count ``c`` in ``(0, floor)`` among the nodes.
    """

    slots: torch.Tensor
    floor: float
    num_nodes: int
    alias: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    alias_share: float
    lack_bound: float = 0.0

    def __post_init__(self) -> None:
        _check(self.slots, "noise slots", torch.int64, 1)
        if self.slots.numel() == 0:
            raise ValueError("graphemb_kernels.skipgram_train: noise slots must not be empty")
        low, high = (int(v) for v in torch.aminmax(self.slots))
        if low < 0 or high >= self.num_nodes:
            raise IndexError(
                f"graphemb_kernels.skipgram_train: noise slots hold ids in [{low}, {high}], "
                f"outside [0, {self.num_nodes})"
            )
        if not (math.isfinite(self.floor) and self.floor > 0):
            raise ValueError(
                f"graphemb_kernels.skipgram_train: the noise floor must be > 0, got {self.floor}"
            )
        _check_alias(self.alias, empty=True)
        columns = self.alias[0].shape[0]
        bound = self.lack_bound
        if not (math.isfinite(bound) and bound >= 0) or (columns > 0 and bound > 0):
            raise ValueError(
                "graphemb_kernels.skipgram_train: the noise's lack bound must be a finite "
                f"number >= 0, and 0 with an alias table; got {bound} with {columns} columns"
            )
        if not (0 <= self.alias_share < 1) or (columns == 0 and bound == 0) != (
            self.alias_share == 0
        ):
            raise ValueError(
                "graphemb_kernels.skipgram_train: the noise's alias share must be in [0, 1), "
                "and 0 exactly when it has neither an alias table nor a lack bound; got "
                f"{self.alias_share} with {columns} columns and lack bound {bound}"
            )


#: The noise of :class:`SkipGramTrainer`: slots, or an alias table ``(nodes, keep, alias)``
#: (int64, float64, int64, each of shape (C,)) over any weights.
Noise = SlotNoise | tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def float24_width(dimensions: int) -> int:
    """Bytes of a row of ``dimensions`` float24 values (blocks of 8 values, 24 bytes each;
    ``csrc/skipgram/output_rows.h``): the columns of a uint8 ``syn1``."""
    return -(-dimensions // 8) * 24


def _check(
    tensor: torch.Tensor, name: str, dtype: torch.dtype | tuple[torch.dtype, ...], dims: int
) -> None:
    prefix = f"graphemb_kernels.skipgram_train: {name}"
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
    if tensor.dtype not in dtypes:
        names = " or ".join(dtype_name(d) for d in dtypes)
        raise TypeError(f"{prefix} must be {names}, got {dtype_name(tensor.dtype)}")
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or tensor.dim() != dims:
        raise ValueError(
            f"{prefix} must be a contiguous CPU tensor of {dims} dimension(s), got shape "
            f"{list(tensor.shape)} on {tensor.device}"
        )


def _check_tables(
    syn0: torch.Tensor, syn1: torch.Tensor, counts: torch.Tensor, noise: Noise
) -> None:
    """Dtypes, layouts and matching shapes of the tables, counts and noise."""
    _check(syn0, "syn0", torch.float32, 2)
    _check(syn1, "syn1", tuple(_SYN1_FORMATS), 2)
    _check(counts, "counts", (torch.int64, torch.float64), 1)
    num_nodes, dim = syn0.shape
    want = (num_nodes, float24_width(dim) if syn1.dtype == torch.uint8 else dim)
    if tuple(syn1.shape) != want:
        raise ValueError(
            f"graphemb_kernels.skipgram_train: syn1 of {dtype_name(syn1.dtype)} must have shape "
            f"{list(want)} for syn0 {list(syn0.shape)}, got {list(syn1.shape)}"
        )
    entries = num_nodes + 1 if counts.dtype == torch.int64 else num_nodes
    if counts.shape[0] != entries:
        kind = "an int64 indptr" if counts.dtype == torch.int64 else "float64 values"
        raise ValueError(
            f"graphemb_kernels.skipgram_train: counts as {kind} must have {entries} entries for "
            f"{num_nodes} nodes, got {counts.shape[0]}"
        )
    if isinstance(noise, SlotNoise):
        if counts.dtype != torch.int64 or noise.num_nodes != num_nodes:
            raise ValueError(
                "graphemb_kernels.skipgram_train: noise slots need the counts as an int64 "
                f"indptr and slots of {num_nodes} nodes, got {dtype_name(counts.dtype)} counts "
                f"and slots of {noise.num_nodes} nodes"
            )
        return
    _check_alias(noise, empty=False)


def _check_alias(table: tuple[torch.Tensor, ...], *, empty: bool) -> None:
    """An alias table ``(nodes, keep, alias)``: types, layouts, one length (0 if ``empty``
    allows it)."""
    nodes, keep, alias = table
    _check(nodes, "noise_nodes", torch.int64, 1)
    _check(keep, "noise_keep", torch.float64, 1)
    _check(alias, "noise_alias", torch.int64, 1)
    columns = nodes.shape[0]
    if not ((columns > 0 or empty) and keep.shape[0] == columns == alias.shape[0]):
        raise ValueError(
            "graphemb_kernels.skipgram_train: the alias table's three arrays must have the same "
            f"positive length, got {columns}, {keep.shape[0]}, {alias.shape[0]}"
        )


class SkipGramTrainer:
    """The kernel prepared for one run's tables: ``syn0``, ``syn1``, the counts and the
    noise are checked and the kernel's configuration is built once; each call then trains
    one chunk of walks: trains ``syn0`` (input rows) and ``syn1`` (output rows) in place.

    A run calls the kernel once per chunk of walks, thousands of times: preparing it once
    leaves a call with a few integers to set, instead of thirty checks and fields whose
    Python objects, freed and allocated again every chunk, spread over new pages of
    Python's allocator as the run goes on (130 KiB over 4,000 chunks).

    The trainer holds the tensors it was given: the kernel reads them through their
    addresses.

    Parameters
    ----------
    syn0 : Tensor of float32 (N, D)
    syn1 : Tensor of float32 (N, D), bfloat16 (N, D) or uint8 (N, float24_width(D))
        Output rows: float32; bfloat16; or float24 (a float32 less its lowest byte), packed as
        ``csrc/skipgram/output_rows.h`` says. Narrow rows are read into float32, trained
        with the same arithmetic and written back with stochastic rounding: exact on
        average, so that updates below half a step are not lost.
    counts : Tensor of int64 (N + 1,) or of float64 (N,)
        How often each node occurs in the walks, up to a constant: an indptr whose
        differences are the counts (a graph's in-degrees, read in place), or the counts.
    noise : SlotNoise or (Tensor, Tensor, Tensor)
        The noise distribution ``counts ** 0.75``: :class:`SlotNoise` (with counts as an
        indptr), or an alias table ``(nodes, keep, alias)`` (int64, float64, int64, (C,)).
    window, negatives : int
        word2vec's window (a reduced window uniform in 1..window is drawn per position) and
        noise nodes per (context, node) pair.
    lr, final_rate : float
        The learning rate falls linearly from ``lr`` to ``lr * final_rate`` over the run's
        walks.
    total_walks, hold_walks : int
        The run's walks, and the walks of each block over which the rate is held.
    vector_width : int
        The vector width of the loop (0: the widest this CPU runs; 4 or 8).
    subsample_threshold : float
        ``sample`` times the counts' total: a token of count ``c`` is kept with probability
        ``min(1, (sqrt(c / s) + 1) * s / c)``
        (:func:`~graphemb.sampling.subsampling.keep_probabilities`); 0 (default) keeps all.
    sharing : {"pair", "position"}
        Which contexts share a draw of ``negatives`` noise nodes: ``"pair"`` (default,
        word2vec's algorithm) draws them for every (context, node) pair; ``"position"``
        draws them once per position of a walk, for all the contexts of its window
        (HogBatch / BlazingText): the window's noise rows are read from memory once
        instead of once per context, each pair is still trained in word2vec's order.
    noise_pool, noise_reuse : int
        0 and 1 (default): every noise node a fresh draw of ``noise``. Else each thread
        keeps a pool of ``noise_pool`` fresh draws and takes every noise node from a
        uniform slot of it; before every ``noise_reuse``-th, the next slot in turn takes a
        fresh draw (``csrc/skipgram/noise.h``). Each noise node still follows the noise
        distribution; a fresh draw serves ``noise_reuse`` of them on average.
    """

    def __init__(
        self,
        syn0: torch.Tensor,
        syn1: torch.Tensor,
        counts: torch.Tensor,
        noise: Noise,
        window: int,
        negatives: int,
        lr: float,
        final_rate: float,
        total_walks: int,
        hold_walks: int,
        *,
        vector_width: int = 0,
        subsample_threshold: float = 0.0,
        sharing: str = "pair",
        noise_pool: int = 0,
        noise_reuse: int = 1,
    ) -> None:
        _check_tables(syn0, syn1, counts, noise)
        _check_noise_options(sharing, noise_pool, noise_reuse)
        if not (math.isfinite(subsample_threshold) and subsample_threshold >= 0):
            raise ValueError(
                "graphemb_kernels.skipgram_train: subsample_threshold must be a finite number "
                f">= 0, got {subsample_threshold!r}"
            )
        self._tensors = (syn0, syn1, counts, noise)
        num_nodes, dim = syn0.shape
        indptr = counts.data_ptr() if counts.dtype == torch.int64 else None
        values = counts.data_ptr() if counts.dtype == torch.float64 else None
        self._config = _Config(
            None, 0, 0, syn0.data_ptr(), syn1.data_ptr(), num_nodes, dim, indptr, values,
            float(subsample_threshold), *_noise_fields(noise), int(window), int(negatives),
            float(lr), float(final_rate), 0, int(total_walks), int(hold_walks), 1, 0,
            int(vector_width), SHARING[sharing], int(noise_pool), int(noise_reuse),
            _SYN1_FORMATS[syn1.dtype],
        )  # fmt: skip
        self._counts = (c_int64 * 2)()

    def __call__(
        self, walks: torch.Tensor, walks_before: int, threads: int, seed: int
    ) -> tuple[int, int]:
        """Train on one chunk of walks.

        Parameters
        ----------
        walks : Tensor of int64 (W, L)
            Node ids, contiguous, on the CPU; -1 pads a walk shorter than L.
        walks_before : int
            Walks of earlier calls of the run: they count as done in the rate's schedule.
        threads, seed : int
            Hogwild threads, and the seed of their random streams.

        Returns
        -------
        (int, int)
            Non-finite scores seen, and scores computed.
        """
        if not (
            walks.dtype == torch.int64
            and walks.dim() == 2
            and walks.device.type == "cpu"
            and walks.is_contiguous()
        ):
            _check(walks, "walks", torch.int64, 2)  # raises, naming what is wrong
        config = self._config
        config.walks = walks.data_ptr()
        config.num_walks, config.length = walks.shape
        config.walks_before = int(walks_before)
        config.threads = int(threads)
        config.seed = int(seed) & _MASK64
        with span("graphemb_kernels::skipgram_train"):
            library().call("ge_skipgram_train", ctypes.byref(config), self._counts)
        return int(self._counts[0]), int(self._counts[1])


def _noise_fields(noise: Noise) -> tuple[int | float | None, ...]:
    """The noise's fields of ``ge_skipgram_config``, in order: the alias table's three
    arrays and its columns, then the slots, their count, the floor, the alias share and the
    lack bound."""
    slots: tuple[int | float | None, ...]
    if isinstance(noise, SlotNoise):
        slots = (
            noise.slots.data_ptr(), noise.slots.numel(), noise.floor, noise.alias_share,
            noise.lack_bound,
        )  # fmt: skip
        alias = noise.alias
    else:
        slots, alias = (None, 0, 1.0, 0.0, 0.0), noise
    arrays = tuple(t.data_ptr() if t.numel() else None for t in alias)
    return (*arrays, alias[0].numel(), *slots)


def _check_noise_options(sharing: str, noise_pool: int, noise_reuse: int) -> None:
    """Refuse a sharing or a pool that the kernel does not take, naming the value."""
    if sharing not in SHARING:
        raise ValueError(
            f"graphemb_kernels.skipgram_train: sharing must be one of {sorted(SHARING)}, got "
            f"{sharing!r}"
        )
    if noise_pool < 0 or noise_reuse < 1 or (noise_pool == 0 and noise_reuse != 1):
        raise ValueError(
            f"graphemb_kernels.skipgram_train: need noise_pool >= 0 and noise_reuse >= 1 (1 "
            f"without a pool), got {noise_pool} and {noise_reuse}"
        )
