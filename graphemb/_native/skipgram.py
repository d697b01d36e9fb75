"""word2vec's skip-gram with negative sampling over random walks, compiled: Hogwild
threads updating the two tables in place (the compiled backend of
:mod:`graphemb.skipgram`)."""

from __future__ import annotations

import ctypes
from ctypes import c_double, c_int64, c_uint64, c_void_p

import torch

from .library import library, span
from .tensors import dtype_name

__all__ = ["SHARING", "float24_width", "skipgram_train"]


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
        ("keep", c_void_p),
        ("noise_node", c_void_p),
        ("noise_keep", c_void_p),
        ("noise_alias", c_void_p),
        ("noise_columns", c_int64),
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


#: ``sharing`` of :func:`skipgram_train` and its code in ``ge_skipgram_config``.
SHARING = {"pair": 0, "position": 1}

#: The output rows' formats by the dtype of ``syn1``: their ``syn1_format`` codes.
_SYN1_FORMATS = {torch.float32: 0, torch.bfloat16: 1, torch.uint8: 2}


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
    walks: torch.Tensor,
    syn0: torch.Tensor,
    syn1: torch.Tensor,
    keep: torch.Tensor,
    noise_nodes: torch.Tensor,
    noise_keep: torch.Tensor,
    noise_alias: torch.Tensor,
) -> None:
    """Dtypes, layouts and matching shapes of everything the kernel reads or writes."""
    _check(walks, "walks", torch.int64, 2)
    _check(syn0, "syn0", torch.float32, 2)
    _check(syn1, "syn1", tuple(_SYN1_FORMATS), 2)
    _check(keep, "keep", torch.float64, 1)
    _check(noise_nodes, "noise_nodes", torch.int64, 1)
    _check(noise_keep, "noise_keep", torch.float64, 1)
    _check(noise_alias, "noise_alias", torch.int64, 1)
    num_nodes, dim = syn0.shape
    want = (num_nodes, float24_width(dim) if syn1.dtype == torch.uint8 else dim)
    if tuple(syn1.shape) != want:
        raise ValueError(
            f"graphemb_kernels.skipgram_train: syn1 of {dtype_name(syn1.dtype)} must have shape "
            f"{list(want)} for syn0 {list(syn0.shape)}, got {list(syn1.shape)}"
        )
    if keep.shape[0] != num_nodes:
        raise ValueError(
            f"graphemb_kernels.skipgram_train: keep has {keep.shape[0]} entries for {num_nodes} "
            "nodes"
        )
    columns = noise_nodes.shape[0]
    if not (columns > 0 and noise_keep.shape[0] == columns == noise_alias.shape[0]):
        raise ValueError(
            "graphemb_kernels.skipgram_train: the alias table's three arrays must have the same "
            f"positive length, got {columns}, {noise_keep.shape[0]}, {noise_alias.shape[0]}"
        )


def skipgram_train(
    walks: torch.Tensor,
    syn0: torch.Tensor,
    syn1: torch.Tensor,
    keep: torch.Tensor,
    noise_nodes: torch.Tensor,
    noise_keep: torch.Tensor,
    noise_alias: torch.Tensor,
    window: int,
    negatives: int,
    lr: float,
    final_rate: float,
    walks_before: int,
    total_walks: int,
    hold_walks: int,
    threads: int,
    seed: int,
    vector_width: int = 0,
    *,
    sharing: str = "pair",
    noise_pool: int = 0,
    noise_reuse: int = 1,
) -> tuple[int, int]:
    """Train ``syn0`` (input rows) and ``syn1`` (output rows) in place on ``walks``.

    Parameters
    ----------
    walks : Tensor of int64 (W, L)
        Node ids; -1 pads a walk shorter than L.
    syn0 : Tensor of float32 (N, D)
    syn1 : Tensor of float32 (N, D), bfloat16 (N, D) or uint8 (N, float24_width(D))
        Output rows: float32; bfloat16; or float24 (a float32 less its lowest byte), packed as
        ``csrc/skipgram/output_rows.h`` says. Narrow rows are read into float32, trained
        with the same arithmetic and written back with stochastic rounding: exact on
        average, so that updates below half a step are not lost.
    keep : Tensor of float64 (N,)
        Subsampling's keep probability of each node.
    noise_nodes, noise_keep, noise_alias : Tensor (C,)
        The alias table of the noise distribution (int64, float64, int64).
    window, negatives : int
        word2vec's window (a reduced window uniform in 1..window is drawn per position) and
        noise nodes per (context, node) pair.
    lr, final_rate : float
        The learning rate falls linearly from ``lr`` to ``lr * final_rate`` over
        ``total_walks`` walks, held for blocks of ``hold_walks`` walks; ``walks_before``
        walks of earlier calls count as done.
    threads, seed, vector_width : int
        Hogwild threads, the seed of their random streams, and the vector width of the loop
        (0: the widest this CPU runs; 4 or 8).
    sharing : {"pair", "position"}
        Which contexts share a draw of ``negatives`` noise nodes: ``"pair"`` (default,
        word2vec's algorithm) draws them for every (context, node) pair; ``"position"``
        draws them once per position of a walk, for all the contexts of its window
        (HogBatch / BlazingText): the window's noise rows are read from memory once
        instead of once per context, each pair is still trained in word2vec's order.
    noise_pool, noise_reuse : int
        0 and 1 (default): every noise node a fresh draw of the alias table. Else each
        thread keeps a pool of ``noise_pool`` fresh draws and takes every noise node from a
        uniform slot of it; before every ``noise_reuse``-th, the next slot in turn takes a
        fresh draw (``csrc/skipgram/noise.h``). Each noise node still follows the noise
        distribution; a fresh draw serves ``noise_reuse`` of them on average.

    Returns
    -------
    (int, int)
        Non-finite scores seen, and scores computed.
    """
    _check_tables(walks, syn0, syn1, keep, noise_nodes, noise_keep, noise_alias)
    _check_noise_options(sharing, noise_pool, noise_reuse)
    num_nodes, dim = syn0.shape
    columns = noise_nodes.shape[0]
    config = _Config(
        walks.data_ptr(), walks.shape[0], walks.shape[1], syn0.data_ptr(), syn1.data_ptr(),
        num_nodes, dim, keep.data_ptr(), noise_nodes.data_ptr(), noise_keep.data_ptr(),
        noise_alias.data_ptr(), columns, int(window), int(negatives), float(lr),
        float(final_rate), int(walks_before), int(total_walks), int(hold_walks), int(threads),
        int(seed) & ((1 << 64) - 1), int(vector_width), SHARING[sharing], int(noise_pool),
        int(noise_reuse), _SYN1_FORMATS[syn1.dtype],
    )  # fmt: skip
    counts = (c_int64 * 2)()
    with span("graphemb_kernels::skipgram_train"):
        library().call("ge_skipgram_train", ctypes.byref(config), counts)
    return int(counts[0]), int(counts[1])


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
