"""The contenders: one training step of graphemb and of its peers, built the same way.

A step = lookup of a batch of ids + loss + backward + optimizer step (+ the library's
``zero_grad`` where it has one). Peers: torch ``nn.Embedding(sparse=True)`` with
``torch.optim.SparseAdam`` / ``Adagrad``, ``dgl.nn.NodeEmbedding`` with DGL's sparse
optimizers, and FBGEMM's CPU table-batched embedding, whose backward applies Adagrad or
row-wise Adagrad in place (DGL and FBGEMM: the dgl stack only). Every table starts
``uniform(-0.1, 0.1)``; lr 0.01; every other setting is the library's default.
:func:`from_spec` builds any of them in a worker process of its own (:mod:`harness.isolated`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.profiler import record_function

from . import phases
from .phases import PHASE_SPANS
from .workload import Loss, Workload, rank_workload, unique_name

LR = 0.01
DGL_STORE_PORT = 12346  # hard-coded in dgl/nn/pytorch/sparse_emb.py

Sync = Callable[[], None] | None


@dataclass
class Contender:
    """One timed unit: ``step(i)`` = lookup of batch ``i`` + loss + backward + optimizer step.

    ``profile(i)`` does the same inside ``record_function`` spans named
    :data:`harness.phases.PHASE_SPANS` (lookup, loss, backward, step), which
    :func:`harness.phases.profile_phases` reads back from a ``torch.profiler`` profile.
    """

    name: str
    family: str  # "graphemb" | "torch" | "dgl" | "fbgemm"
    optimizer: str  # "adam" | "adagrad" | "rowwise_adagrad"
    rows_per_step: int  # ids looked up per step by this process
    step: Callable[[int], object]  # a return value reaches RankPool.call only
    profile: Callable[[int], None]
    objects: list = field(default_factory=list)  # keeps tables alive; dropped by close()
    # operations of its own a worker process runs on command (harness.isolated): name ->
    # function of keyword options returning JSON; "info" is answered with the build
    ops: dict[str, Callable[..., object]] = field(default_factory=dict)

    def close(self) -> None:
        self.objects.clear()
        self.ops.clear()
        self.step = self.profile = _closed


def _closed(_: int) -> None:
    raise RuntimeError("this contender was closed")


def _phased(
    lookup: Callable[[torch.Tensor], torch.Tensor],
    loss: Loss,
    update: Callable[[], object],
    batches: Sequence[torch.Tensor],
    sync: Sync = None,
) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """The timed unit and its twin with a ``record_function`` span around every phase."""

    def step(i: int) -> None:
        rows = lookup(batches[i % len(batches)])
        loss(rows).backward()
        update()

    def done() -> None:  # device work of a phase finishes inside its span
        if sync is not None:
            sync()

    def profile(i: int) -> None:
        ids = batches[i % len(batches)]
        with record_function(PHASE_SPANS["lookup"]):
            rows = lookup(ids)
            done()
        with record_function(PHASE_SPANS["loss"]):
            value = loss(rows)
            done()
        with record_function(PHASE_SPANS["backward"]):
            value.backward()
            done()
        with record_function(PHASE_SPANS["step"]):
            update()
            done()

    return step, profile


def _contender(
    name: str,
    family: str,
    optimizer: str,
    lookup: Callable[[torch.Tensor], torch.Tensor],
    update: Callable[[], object],
    work: Workload,
    objects: list,
    sync: Sync = None,
) -> Contender:
    """A :class:`Contender` from its phases (see :func:`_phased`) and what keeps it alive."""
    step, profile = _phased(lookup, work.loss, update, work.batches, sync)
    return Contender(name, family, optimizer, work.batches[0].numel(), step, profile, objects)


def _uniform_init(table: torch.Tensor) -> torch.Tensor:
    table.uniform_(-0.1, 0.1)
    return table


#: The classes of graphemb's and DGL's sparse optimizers (they share the names and the
#: ``([table], lr=)`` call; DGL has no row-wise Adagrad).
SPARSE_OPTIMIZERS = {
    "adam": "SparseAdam",
    "adagrad": "SparseAdagrad",
    "rowwise_adagrad": "SparseRowWiseAdagrad",
}
#: FBGEMM's fused optimizers of the same formulas (its CPU tables have no Adam).
FBGEMM_OPTIMIZERS = {"adagrad": "EXACT_ADAGRAD", "rowwise_adagrad": "EXACT_ROWWISE_ADAGRAD"}


def _sparse_optimizer(library, optimizer: str, emb, lr: float):
    """``library.<SPARSE_OPTIMIZERS[optimizer]>`` of the one table ``emb``."""
    return getattr(library, SPARSE_OPTIMIZERS[optimizer])([emb], lr=lr)


def graphemb_contender(
    name: str,
    optimizer: str,
    work: Workload,
    *,
    table_name: str,
    device: torch.device | str | None = None,
    partition=None,
    lr: float = LR,
    sync: Sync = None,
) -> Contender:
    """graphemb ``NodeEmbedding`` + ``graphemb.optim.SparseAdam`` / ``SparseAdagrad``.

    Its storage follows graphemb's rules: local without a process group, shared memory
    with one (CPU, no partition), partitioned with ``partition`` or on CUDA.
    """
    import graphemb
    import graphemb.optim

    emb = graphemb.NodeEmbedding(
        work.num_embeddings,
        work.dim,
        table_name,
        init_func=_uniform_init,
        device=device,
        partition=partition,
    )
    opt = _sparse_optimizer(graphemb.optim, optimizer, emb, lr)
    return _contender(name, "graphemb", optimizer, emb, opt.step, work, [emb, opt], sync)


def single_process_graphemb(args, work: Workload) -> tuple[str, Contender]:
    """The single-process graphemb contender of a comparison with ranks: the whole batch in
    this process with ``args.threads`` threads; its name and the contender."""
    name = f"graphemb 1 proc x {args.threads} thr"
    return name, graphemb_contender(name, args.optimizer, work, table_name=unique_name("single"))


def torch_contender(
    name: str,
    optimizer: str,
    work: Workload,
    *,
    device: torch.device | str = "cpu",
    lr: float = LR,
    sync: Sync = None,
) -> Contender:
    """``nn.Embedding(sparse=True)`` + ``torch.optim.SparseAdam`` / ``torch.optim.Adagrad``."""
    checks = getattr(torch.sparse, "check_sparse_tensor_invariants", None)
    if checks is not None and hasattr(checks, "disable"):
        checks.disable()  # torch's default, stated explicitly (silences a warning of Adagrad)
    emb = torch.nn.Embedding(work.num_embeddings, work.dim, sparse=True, device=device)
    with torch.no_grad():
        _uniform_init(emb.weight)
    params = list(emb.parameters())
    opt: torch.optim.Optimizer = (
        torch.optim.SparseAdam(params, lr=lr)
        if optimizer == "adam"
        else torch.optim.Adagrad(params, lr=lr)
    )

    def update() -> None:
        opt.step()
        opt.zero_grad(set_to_none=True)

    return _contender(name, "torch", optimizer, emb, update, work, [emb, opt], sync)


def dgl_contender(
    name: str,
    optimizer: str,
    work: Workload,
    *,
    table_name: str,
    lr: float = LR,
) -> Contender:
    """``dgl.nn.NodeEmbedding`` + ``dgl.optim.SparseAdam`` / ``SparseAdagrad`` (CPU).

    With ``torch.distributed`` initialised this is DGL's multi-process mode: the table and
    the optimizer state live in DGL shared memory, gradients travel through shared-memory
    buffers, and each rank updates the rows ``id % world_size == rank``. DGL then opens its
    own TCPStore on the fixed port 127.0.0.1:12346 (``dgl/nn/pytorch/sparse_emb.py``).
    """
    import dgl

    emb = dgl.nn.NodeEmbedding(work.num_embeddings, work.dim, table_name, init_func=_uniform_init)
    opt = _sparse_optimizer(dgl.optim, optimizer, emb, lr)

    def update() -> None:
        opt.zero_grad()  # DGL: marks the trace to be dropped once this step has used it
        opt.step()

    return _contender(name, "dgl", optimizer, emb, update, work, [emb, opt])


def fbgemm_contender(name: str, optimizer: str, work: Workload, *, lr: float = LR) -> Contender:
    """FBGEMM's ``SplitTableBatchedEmbeddingBagsCodegen`` on the CPU: one table in host
    memory, float32, bags of one id each (a lookup), whose backward sums each row's
    gradients and applies ``EXACT_ADAGRAD`` / ``EXACT_ROWWISE_ADAGRAD`` in place (the same
    formulas as graphemb's ``SparseAdagrad`` / ``SparseRowWiseAdagrad``). Its step is in
    the backward: the optimizer phase of a profile is empty."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        ComputeDevice,
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    table = SplitTableBatchedEmbeddingBagsCodegen(
        [(work.num_embeddings, work.dim, EmbeddingLocation.HOST, ComputeDevice.CPU)],
        optimizer=getattr(EmbOptimType, FBGEMM_OPTIMIZERS[optimizer]),
        learning_rate=lr,
        pooling_mode=PoolingMode.SUM,
        weights_precision=SparseType.FP32,
    )
    with torch.no_grad():
        _uniform_init(table.split_embedding_weights()[0])
    offsets: dict[int, torch.Tensor] = {}  # bag boundaries 0, 1, ..., B per batch size

    def lookup(ids: torch.Tensor) -> torch.Tensor:
        if ids.numel() not in offsets:  # made once, outside the timed steps that follow
            offsets[ids.numel()] = torch.arange(ids.numel() + 1)
        return table(ids, offsets[ids.numel()])

    return _contender(name, "fbgemm", optimizer, lookup, lambda: None, work, [table])


def from_spec(spec: dict) -> Contender:
    """The contender of ``spec`` built in a worker process (:mod:`harness.isolated`):
    ``family`` and ``optimizer``, its ``name``, and the workload's options
    (:func:`harness.workload.rank_spec`). Its ``info`` operation names the library's
    version; ``operators`` prints torch.profiler's operator table of a few steps."""
    work = rank_workload(spec, 0, 1)
    name, family, optimizer = spec["name"], spec["family"], spec["optimizer"]
    if family == "graphemb":
        import graphemb as library

        contender = graphemb_contender(name, optimizer, work, table_name=unique_name(optimizer))
    elif family == "torch":
        library = torch
        contender = torch_contender(name, optimizer, work)
    elif family == "dgl":
        available, why = dgl_available()
        if not available:
            raise RuntimeError(why)
        import dgl as library

        contender = dgl_contender(name, optimizer, work, table_name=unique_name("dgl"))
    elif family == "fbgemm":
        contender = fbgemm_contender(name, optimizer, work)
        import fbgemm_gpu as library
    else:
        raise ValueError(f"unknown family {family!r}")
    version = getattr(library, "__version__", "unknown")
    contender.ops["info"] = lambda: {"library": f"{family} {version}"}
    contender.ops["operators"] = lambda start, count: phases.operator_table(
        contender.step, name, start, count
    )
    return contender


def dgl_available() -> tuple[bool, str]:
    """(True, version) when DGL imports here, else (False, why not)."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    try:
        import dgl
    except Exception as err:  # ImportError, or DGL's own errors on an unsupported torch
        return False, f"DGL is not importable on this stack ({type(err).__name__}: {err})"
    return True, dgl.__version__


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` can be bound now (DGL's multi-process store needs its port)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
