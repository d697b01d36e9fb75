"""``NodeEmbedding``: a large learnable table, one row per node, updated sparsely.

The front of the package: it validates ids, returns rows, and remembers the gradients of
the rows it returned so that a :mod:`graphemb.optim` optimizer can apply them. Where the
rows live is the business of :mod:`graphemb.storage`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import timedelta

import torch

from ._checks import LookupIds, as_size
from ._row_gradients import RecordedGradients, traced_rows
from .distributed.coordination import DEFAULT_TIMEOUT, as_timedelta
from .storage import Partition, RowPrefetch, RowStorage, create_storage
from .storage.initialization import table_initializer

__all__ = ["NodeEmbedding", "RecordedGradients"]

_TABLE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class NodeEmbedding:
    """A learnable table of ``num_embeddings`` rows of size ``embedding_dim``.

    The signature follows :class:`dgl.nn.NodeEmbedding`. The table is not a
    :class:`torch.nn.Parameter`: attach it to a model as a plain attribute and
    ``model.parameters()``, dense optimizers and ``DistributedDataParallel`` never see it.
    Train it with a sparse optimizer from :mod:`graphemb.optim`, which updates only the rows
    that were looked up.

    Where the rows live depends on the process group, ``device`` and ``partition``:

    * no ``torch.distributed`` process group: in this process, on ``device`` (CPU or CUDA);
    * a process group, CPU, no ``partition``, every rank on one machine: once, in shared
      memory that every rank maps; each row is updated by one owner rank (blocks of rows
      dealt to the ranks in turn);
    * the same when ranks span machines (or ``machines`` is given): ``"hierarchical"`` --
      rows partitioned across machines, each machine's share once in its shared memory
      (:mod:`graphemb.storage.hierarchical`);
    * a process group and CUDA, or any ``partition`` (without ``machines``): partitioned;
      each rank stores only the rows ``partition`` assigns to it, and lookups fetch rows
      from their owners.

    With a process group, construction is collective: every rank creates the same
    embeddings, with the same arguments, in the same order. In partitioned and hierarchical
    modes every lookup is collective too (a rank with nothing to look up passes an empty
    tensor): see :attr:`graphemb.storage.RowStorage.collective_lookups`.

    Parameters
    ----------
    num_embeddings : int
        Number of rows (nodes). Sizes may be any integer-like value (a numpy integer such as
        ``np.int64(2708)``, a 0-d integer tensor).
    embedding_dim : int
        Size of each row.
    name : str
        Name of the table: identifies it in checkpoints and, with a process group, its
        shared memory. Two live embeddings of one job must not share a name.
    init_func : callable, optional
        ``init_func(table) -> table`` initialises the zero table (e.g.
        ``lambda t: torch.nn.init.uniform_(t, -1, 1)``); it may fill ``table`` in place and
        return it, or return a new tensor of the same shape. With shared memory it runs
        once per machine; when partitioned, on each rank's own rows; so its result depends
        on the layout. ``init_func(table, ids)`` (two required arguments) also gets the
        global row ids of ``table``'s rows (int64, (len(table),)): one that fills each row
        from its id alone gives the same table on every layout (1 process, shared memory,
        partitions, machines), and is run on chunks of large tables in parallel, on all
        cores, with the same result (e.g.
        :func:`graphemb.storage.initialization.uniform_by_id`). To copy in a prepared full
        table use :meth:`all_set_embedding`. If ``init_func`` fails, every rank raises an
        error naming the layout and the rows. Default: zeros.
    device : torch.device or str, optional
        Where rows are stored. Default: CPU.
    partition : Partition, optional
        Row ownership across ranks; selects partitioned storage. Default: ``id % world_size``
        (shared memory: blocks of rows in turn, see
        :meth:`~graphemb.storage.shared.SharedMemoryStorage.default_partition`).
    dtype : torch.dtype
        Element type of the table: float32 (default), float64, float16 or bfloat16.
        Optimizers compute in float32 (or float64) whatever the table's type.
    timeout : timedelta or float, keyword-only
        Longest wait for other ranks (store keys, collectives) before a
        :class:`~graphemb.CoordinationError` names the waiting rank. Default: 10 minutes.
    machines : sequence, keyword-only
        The machine of every rank (any labels, one per rank, e.g. ``[0, 0, 1, 1]``), for
        CPU tables: selects the hierarchical layout. Default: ``$GRAPHEMB_MACHINES`` or the
        host of each rank (see :mod:`graphemb.distributed.topology`).
    overlap : bool, keyword-only
        Hierarchical storage: push this step's gradient rows in the background as soon as
        backward has produced them (``step()`` then waits), and let :meth:`prefetch` route
        lookups ahead. Results are bit-identical to ``overlap=False`` for one backward per
        step (with several, equal up to the order of summation). ``zero_grad()`` between
        backward and ``step()`` then raises. Other storages ignore it (synchronous steps).

    Examples
    --------
    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseAdam
    >>> emb = NodeEmbedding(1000, 16, "nodes", init_func=lambda t: t.uniform_(-0.1, 0.1))
    >>> opt = SparseAdam([emb], lr=0.01)
    >>> rows = emb(torch.tensor([[1, 2], [2, 999]]))   # any shape of integer ids
    >>> rows.shape
    torch.Size([2, 2, 16])
    >>> rows.pow(2).sum().backward()
    >>> opt.step()                                      # updates rows 1, 2 and 999 only
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        name: str,
        init_func: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
        device: torch.device | str | None = None,
        partition: Partition | None = None,
        dtype: torch.dtype = torch.float32,
        *,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        machines: Sequence[object] | None = None,
        overlap: bool = False,
    ) -> None:
        num_embeddings = as_size("num_embeddings", num_embeddings, minimum=1)
        embedding_dim = as_size("embedding_dim", embedding_dim, minimum=1)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}")
        if init_func is not None and not callable(init_func):
            raise TypeError(f"init_func must be callable, got {type(init_func).__name__}")
        if dtype not in _TABLE_DTYPES:
            raise ValueError(f"dtype must be one of {_TABLE_DTYPES}, got {dtype!r}")
        device = torch.device("cpu" if device is None else device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        timeout = as_timedelta(timeout)

        self._name = name
        self._num_embeddings = num_embeddings
        self._embedding_dim = embedding_dim
        self._storage: RowStorage = create_storage(
            name, num_embeddings, device, partition, timeout, machines, bool(overlap)
        )
        init = None if init_func is None else table_initializer(init_func, name, self._storage)
        self._weight = self._storage.create_table("weight", (embedding_dim,), dtype, init)
        # Reads under autograd hang off this zero-size leaf, so that backward records the
        # rows' gradient for the optimizer (_row_gradients.py).
        self._anchor = torch.empty(0, requires_grad=True)
        self._gradients: list[tuple[torch.Tensor, torch.Tensor]] = []
        # Overlap: the push started at the end of this step's first backward, if any, and
        # the routed lookups waiting for their turn (oldest first).
        self._early_push: Future | None = None
        self._push_queued = False
        self._prefetches: deque[RowPrefetch] = deque()
        self._ids = LookupIds(f"NodeEmbedding {name!r}", num_embeddings, self._storage)

    # ------------------------------------------------------------------ lookup
    def __call__(
        self, node_ids: torch.Tensor, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Rows of ``node_ids``.

        Parameters
        ----------
        node_ids : Tensor of integers, any shape
            Node ids in ``[0, num_embeddings)``. Duplicates are fine (their gradients add
            up). An empty tensor is fine.
        device : torch.device or str, optional
            Device of the result. Default: the device of ``node_ids``.

        Returns
        -------
        Tensor of shape ``node_ids.shape + (embedding_dim,)`` and the table's dtype.
            When autograd is recording, the result requires grad and its gradient is kept
            for the next optimizer step; under ``torch.no_grad()`` nothing is kept.

        Raises
        ------
        TypeError
            ``node_ids`` is not a tensor of integers.
        IndexError
            An id is outside ``[0, num_embeddings)`` (the message names it). Raised here,
            before anything is read or recorded -- except for CUDA ids looked up in a
            single-process CUDA table: checking them here would make every lookup wait for
            the GPU, so the check runs on the device, out-of-range ids read a clamped (valid)
            row, and the IndexError is raised by the next :meth:`check_ids` -- called by the
            next optimizer ``step()`` (before any row changes) and by
            :meth:`all_get_embedding`.
        """
        ids = self._ids.checked_type(node_ids)
        out_device = ids.device if device is None else torch.device(device)
        flat = self._ids.flat(ids)
        if torch.is_grad_enabled():
            rows = traced_rows(
                self._anchor, flat, lambda: self._read(flat).to(out_device), self._record_gradient
            )
        else:
            rows = self._read(flat).to(out_device)
        return rows.view(*ids.shape, self._embedding_dim)

    def read_in_place(
        self,
        node_ids: torch.Tensor,
        read: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        rows_gradient: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor | None:
        """``read(weight, ids)``, a function of the rows of ``node_ids``, computed on the
        table where it lies, without a lookup's copy of the rows (e.g. a GNN layer that
        aggregates the rows as it reads them); their gradient reaches the optimizer as a
        lookup's would. ``None``, nothing read, where this process does not hold every row
        (partitioned, hierarchical), a :meth:`prefetch` is pending, or the ids are not 1-D
        on the table's device: look the rows up then.

        Parameters
        ----------
        node_ids : Tensor of integers, shape (S,)
            Ids in ``[0, num_embeddings)``, checked as a lookup checks them.
        read : callable (weight (N, dim), ids (S,) int64) -> Tensor
            Reads only the rows ``ids`` of ``weight``, and never writes it.
        rows_gradient : callable (the gradient of read's result) -> Tensor (S, dim)
            The gradient of the rows ``weight[ids]``.
        """
        ids = self._ids.checked_type(node_ids)
        if (
            self._storage.collective_lookups
            or self._prefetches
            or ids.dim() != 1
            or ids.device != self._weight.device
        ):
            return None
        flat = self._ids.flat(ids)
        if not torch.is_grad_enabled():
            return read(self._weight, flat)
        compute = lambda: read(self._weight, flat)  # noqa: E731
        return traced_rows(self._anchor, flat, compute, self._record_gradient, rows_gradient)

    def _read(self, flat_ids: torch.Tensor) -> torch.Tensor:
        if not self._prefetches:
            return self._storage.read_rows(self._weight, flat_ids, "row lookup")
        prefetched = self._prefetches.popleft()
        if not torch.equal(prefetched.ids, flat_ids):
            raise ValueError(
                f"NodeEmbedding {self._name!r}: looked up {flat_ids.numel()} ids that are not "
                f"the {prefetched.ids.numel()} ids of the oldest prefetch: with prefetch(), "
                "every rank must look up exactly the prefetched ids, in prefetch order"
            )
        return self._storage.read_prefetched(self._weight, prefetched, "prefetched row lookup")

    def prefetch(self, node_ids: torch.Tensor) -> RowPrefetch:
        """Start fetching the rows of a coming lookup of ``node_ids``; returns its handle.

        The lookups of a partitioned or hierarchical table exchange ids before rows. With
        ``overlap=True`` this starts that exchange now, in the background, so that the
        lookup only reads and sends rows -- read when the lookup runs, never stale, so
        results are exactly those without prefetch. Lookups use prefetches in order: the
        next lookup of this embedding must ask for exactly ``node_ids`` (else
        ``ValueError``). Collective like a lookup: every rank prefetches, in the same order.
        Elsewhere (one process, shared memory, no overlap) it checks the ids and the lookup
        reads as usual.

        Parameters
        ----------
        node_ids : Tensor of integers, any shape
            The ids the next lookup will pass.

        Returns
        -------
        RowPrefetch
            The handle (``.ids``: the flat int64 ids); the next lookup consumes it.

        Raises
        ------
        TypeError, IndexError
            As a lookup would, before anything starts.
        """
        flat = self._ids.flat(self._ids.checked_type(node_ids))
        prefetched = self._storage.prefetch(flat, "row prefetch")
        self._prefetches.append(prefetched)
        return prefetched

    def check_ids(self) -> None:
        """Raise the ``IndexError`` of ids out of range in CUDA lookups since the last check.

        Lookups of CUDA ids in a single-process CUDA table check their range on the device,
        without waiting for it; this reads the result (a host-device synchronisation). The
        optimizers' ``step()`` and :meth:`all_get_embedding` call it; call it yourself after
        lookups that no step follows (inference) to be sure. A no-op when no such lookup
        happened.

        Raises
        ------
        IndexError
            Naming the first out-of-range id. The gradients recorded since the last step
            are discarded (some of them belong to rows read in place of the bad ids).
        """
        self._ids.raise_pending(before=self.clear_gradients)

    # ------------------------------------------------------------------ gradients
    def _record_gradient(self, flat_ids: torch.Tensor, grad: torch.Tensor) -> None:
        self._gradients.append((flat_ids, grad.reshape(-1, self._embedding_dim)))
        if self._storage.overlaps and self._early_push is None and not self._push_queued:
            # At the end of this backward pass every gradient of this embedding is in (its
            # lookup is the first layer: they come last anyway): push them then, as DDP's
            # reducer finalises, without waiting for step().
            self._push_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._start_early_push)

    def _start_early_push(self) -> None:
        self._push_queued = False
        if self._early_push is None:
            self._early_push = self._start_push("gradient push started by backward", late=False)

    def _start_push(self, operation: str, *, late: bool) -> Future:
        ids, grads = self._take_gradients()
        return self._storage.start_push(ids, [grads], operation, late=late)

    def _pushed_gradients(self, operation: str) -> tuple[torch.Tensor, torch.Tensor]:
        """With overlap: the early push (started now if backward did not) and the late one
        (rows recorded since), both waited for; ``(ids (R,), grads (R, dim))`` this rank
        owns. Every rank runs both, whatever it recorded, so the collectives line up."""
        early, self._early_push = self._early_push, None
        if early is None:
            early = self._start_push(operation, late=False)
        late = self._start_push(f"{operation} (late rows)", late=True)
        early_ids, (early_grads,) = early.result()
        late_ids, (late_grads,) = late.result()
        if not late_ids.numel():
            return early_ids, early_grads
        return torch.cat([early_ids, late_ids]), torch.cat([early_grads, late_grads])

    def take_gradients(self, operation: str = "gradient push") -> RecordedGradients:
        """The gradient rows recorded since the last call (or :meth:`clear_gradients`); forgets
        them. The hand-off from lookups to the optimizers of :mod:`graphemb.optim`.

        Without ``overlap`` this returns the recorded rows as they were looked up: global ids
        with duplicates, one gradient row per looked-up id, for the caller to sum and, with a
        process group, to push to their owners (:meth:`RowStorage.push
        <graphemb.storage.RowStorage.push>`). With ``overlap`` (storage that pushes gradients
        in the background) the rows have already gone to their owners: the result holds the
        rows this rank owns, from every rank, and the call is collective.

        Parameters
        ----------
        operation : str
            What the caller is doing, quoted in errors of the push (with ``overlap``).

        Returns
        -------
        RecordedGradients
            ``ids`` (M,) int64 and ``grads`` (M, embedding_dim) in :attr:`compute_dtype`,
            both on the storage device; ``pushed`` tells whether they went to their owners.
        """
        if self._storage.overlaps:
            return RecordedGradients(*self._pushed_gradients(operation), pushed=True)
        return RecordedGradients(*self._take_gradients(), pushed=False)

    def _take_gradients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Recorded ``(ids (M,), grads (M, dim))`` on the storage device; forgets them."""
        records, self._gradients = self._gradients, []
        device = self._storage.device
        if not records:
            empty = torch.empty((0, self._embedding_dim), dtype=self.compute_dtype, device=device)
            return torch.empty(0, dtype=torch.int64, device=device), empty
        ids = torch.cat([i for i, _ in records]) if len(records) > 1 else records[0][0]
        grads = torch.cat([g.to(device) for _, g in records]) if len(records) > 1 else records[0][1]
        return ids, grads.to(device=device, dtype=self.compute_dtype)

    @property
    def compute_dtype(self) -> torch.dtype:
        """Dtype of gradients and optimizer state: float64 for float64 tables, else float32."""
        return torch.float64 if self._weight.dtype == torch.float64 else torch.float32

    def clear_gradients(self) -> None:
        """Discard the gradient rows recorded since the last :meth:`take_gradients`.

        Raises
        ------
        RuntimeError
            With ``overlap``, when backward has already started pushing them.
        """
        if self._early_push is not None:
            raise RuntimeError(
                f"NodeEmbedding {self._name!r}: this step's gradients are already being "
                "pushed to their owners (overlap=True) and cannot be discarded; call the "
                "optimizer's step() before zero_grad()"
            )
        self._gradients = []

    # ------------------------------------------------------------------ whole table
    def all_get_embedding(self, dst: int | None = None) -> torch.Tensor | None:
        """The whole table as a new CPU tensor (a copy, never a view).

        Collective when the table is partitioned. ``dst=None`` returns it on every rank;
        ``dst=r`` only on rank ``r`` (the others get ``None``).

        Returns
        -------
        Tensor of shape (num_embeddings, embedding_dim), or None.
        """
        self.check_ids()
        return self._storage.gather(self._weight, dst)

    def all_set_embedding(self, values: torch.Tensor) -> None:
        """Copy a whole table in. Collective; every rank passes the same ``values``.

        Parameters
        ----------
        values : Tensor of shape (num_embeddings, embedding_dim)
            Any floating dtype and device; converted to the table's.
        """
        expected = (self._num_embeddings, self._embedding_dim)
        if not isinstance(values, torch.Tensor) or not values.is_floating_point():
            raise TypeError(
                f"NodeEmbedding {self._name!r}: all_set_embedding needs a floating-point "
                f"tensor, got {getattr(values, 'dtype', type(values).__name__)}"
            )
        if tuple(values.shape) != expected:
            raise ValueError(
                f"NodeEmbedding {self._name!r}: all_set_embedding got shape "
                f"{tuple(values.shape)}, expected {expected}"
            )
        # Left on its own device: a partitioned GPU table takes only its rows across.
        values = values.detach().to(dtype=self._weight.dtype)
        self._storage.write_all(self._weight, values)

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        """The table's name: the key of its rows in checkpoints and of its shared segments."""
        return self._name

    @property
    def num_embeddings(self) -> int:
        """Number of rows ``N`` of the whole table (all ranks' rows together)."""
        return self._num_embeddings

    @property
    def embedding_dim(self) -> int:
        """Width ``D`` of a row."""
        return self._embedding_dim

    @property
    def weight(self) -> torch.Tensor:
        """This process's table: every row (local, shared) or the owned rows (partitioned)."""
        return self._weight

    @property
    def device(self) -> torch.device:
        """Device of this process's rows (:attr:`weight`) and of lookups' results."""
        return self._storage.device

    @property
    def dtype(self) -> torch.dtype:
        """Element type of the rows."""
        return self._weight.dtype

    @property
    def rank(self) -> int:
        """This process's rank in the storage's group; 0 without a process group."""
        return self._storage.rank

    @property
    def world_size(self) -> int:
        """Number of processes in the storage's group; 1 without a process group."""
        return self._storage.world_size

    @property
    def partition(self) -> Partition:
        """Which rank owns (updates) which row; one part without a process group."""
        return self._storage.partition

    @property
    def storage_kind(self) -> str:
        """``"local"``, ``"shared"``, ``"hierarchical"`` or ``"partitioned"``."""
        return self._storage.kind

    @property
    def storage(self) -> RowStorage:
        """Where the rows live: the interface optimizers and checkpoints use to create
        per-row state tables in the same layout, read and write rows by global id, and map
        global ids to this process's rows (see :mod:`graphemb.storage`)."""
        return self._storage

    def __repr__(self) -> str:
        return (
            f"NodeEmbedding(name={self._name!r}, num_embeddings={self._num_embeddings}, "
            f"embedding_dim={self._embedding_dim}, storage={self.storage_kind!r}, "
            f"device={self.device}, dtype={self.dtype}, rank={self.rank}, "
            f"world_size={self.world_size})"
        )
