"""The DeepWalk quality panel's trainers, each run in a fresh process of its own.

A user of gensim runs gensim in a process that has not trained anything else; a user of
graphemb runs graphemb in one. So every trainer of ``bench_deepwalk_quality.py`` runs in
a fresh Python interpreter (``python deepwalk_trainers.py TRAINER GRAPH SEED OUT ...``)
that draws the panel's graph, times the walks and the training, writes the rows to
``OUT`` (``.npy``) and prints one ``RESULT {json}`` line (:mod:`harness.fresh`): the
seconds, whether the run diverged, and its process id. The parent scores the rows. No
trainer shares a process, its threads, its allocator or its heap with another; all
inherit the parent's environment (the run's allocator settings, :mod:`harness.allocation`).

Trainers:

* ``gensim``: ``Word2Vec(sg=1, negative=K, hs=0, window, sample, min_count=0, epochs=1)``
  with ``threads`` workers, fed walks drawn by :class:`graphemb.sampling.walks.RandomWalker`;
  time = walks + string conversion + training.
* ``torch``, ``compiled`` and the compiled backend's variants
  (:mod:`skipgram_variants`): :func:`graphemb.skipgram.train_node_embeddings`, ``threads``
  threads; time = walks + training.

    python deepwalk_trainers.py compiled cora 0 /tmp/rows.npy --num-walks 10
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from harness import fresh
from skipgram_variants import named

if TYPE_CHECKING:  # type hints only: graphemb is imported in the trainers' processes
    from graphemb.graph import Graph

HERE = Path(__file__).resolve().parent
#: The trainers by name: gensim, the torch backend and the compiled backend's variants.
GRAPHEMB_TRAINERS: dict[str, tuple[str, dict[str, object]]] = {
    **{name: ("compiled", kwargs) for name, kwargs in named("compiled").items()},
    "torch": ("torch", {}),
}
TRAINERS = ("gensim", *GRAPHEMB_TRAINERS)
#: The walks and model options a trainer takes, with their defaults (the panel's).
SETTINGS = {
    "num_walks": 10,
    "walk_length": 40,
    "window": 10,
    "dimensions": 128,
    "negatives": 5,
    "sample": 1e-3,
    "threads": 2,
}


@dataclass(frozen=True)
class Trained:
    """What a trainer's process returns.

    Attributes
    ----------
    rows : numpy.ndarray of shape (N, dimensions) or None
        The trained rows; ``None`` where the run diverged.
    seconds : float
        Walks and training, timed inside the trainer's process (until the divergence, if
        it diverged).
    pid : int
        The trainer's process id (a fresh process for every run).
    """

    rows: np.ndarray | None
    seconds: float
    pid: int


def train_in_fresh_process(
    trainer: str, graph: str, seed: int, settings: argparse.Namespace, timeout: float = 3600.0
) -> tuple[np.ndarray | None, float]:
    """Run ``trainer`` on the panel's ``graph`` drawn with ``seed`` in a new interpreter.

    Parameters
    ----------
    trainer : str
        One of :data:`TRAINERS`.
    graph : str
        A name of :func:`deepwalk_panel.load`.
    seed : int
        The graph's, the walks' and the trainer's seed.
    settings : argparse.Namespace
        Every option of :data:`SETTINGS`.
    timeout : float
        Seconds the process may take.

    Returns
    -------
    Trained
        The rows (``None`` where the run diverged), the seconds and the process id.

    Raises
    ------
    harness.fresh.RunFailed
        The process exited with an error, printed no result or ran out of time; the
        message names the trainer, the graph and the seed, with the end of its output.
    """
    if trainer not in TRAINERS:
        raise ValueError(f"unknown trainer {trainer!r}; known: {', '.join(TRAINERS)}")
    with tempfile.TemporaryDirectory(prefix="graphemb-panel-") as folder:
        out = Path(folder) / "rows.npy"
        command = [sys.executable, str(Path(__file__)), trainer, graph, str(seed), str(out)]
        for name in SETTINGS:
            command += [f"--{name.replace('_', '-')}", str(getattr(settings, name))]
        result = fresh.run(command, f"{trainer} on {graph} (seed {seed})", cwd=HERE,
                           timeout=timeout)  # fmt: skip
        if result["diverged"]:
            print(f"# {trainer} diverged (seed {seed}): {result['message']}", flush=True)
        rows = None if result["diverged"] else np.load(out)
        return Trained(rows, result["seconds"], result["pid"])


def run_gensim(graph: Graph, settings: argparse.Namespace, seed: int) -> tuple[np.ndarray, float]:
    """gensim's skip-gram on the walks of :class:`RandomWalker`: the rows and the seconds."""
    import torch
    from gensim.models import Word2Vec

    from graphemb.sampling.walks import PAD, RandomWalker

    start = time.perf_counter()
    walker = RandomWalker(graph, weighted=graph.edge_weight is not None)
    generator = torch.Generator().manual_seed(seed)
    sentences: list[list[str]] = []
    for _ in range(settings.num_walks):
        order = torch.randperm(graph.num_nodes, generator=generator)
        walks = walker(order, settings.walk_length - 1, generator=generator).tolist()
        sentences += [[str(v) for v in walk if v != PAD] for walk in walks]
    model = Word2Vec(
        sentences,
        vector_size=settings.dimensions,
        window=settings.window,
        sg=1,
        hs=0,
        negative=settings.negatives,
        sample=settings.sample,
        min_count=0,
        workers=settings.threads,
        epochs=1,
        seed=seed,
    )
    seconds = time.perf_counter() - start
    table = np.zeros((graph.num_nodes, settings.dimensions), dtype=np.float32)
    for node in range(graph.num_nodes):
        if str(node) in model.wv.key_to_index:
            table[node] = model.wv[str(node)]
    return table, seconds


def run_graphemb(
    graph: Graph, settings: argparse.Namespace, trainer: str, seed: int
) -> tuple[np.ndarray, float]:
    """:func:`train_node_embeddings` as ``trainer`` (:data:`GRAPHEMB_TRAINERS`),
    ``threads`` threads, the panel's walks and model: the rows and the seconds."""
    from graphemb.skipgram import CompiledOptions, train_node_embeddings

    backend, kwargs = GRAPHEMB_TRAINERS[trainer]
    start = time.perf_counter()
    table = train_node_embeddings(
        graph,
        backend=backend,
        compiled_options=CompiledOptions(**kwargs) if backend == "compiled" else None,
        workers=settings.threads,
        dimensions=settings.dimensions,
        walk_length=settings.walk_length,
        num_walks=settings.num_walks,
        window=settings.window,
        negatives=settings.negatives,
        sample=settings.sample,
        weighted=graph.edge_weight is not None,
        seed=seed,
    )
    return table.numpy(), time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """The trainer's process: draw the graph, train, write the rows, print the result."""
    from harness import cli

    parser = cli.parser(__doc__.split("\n")[0])
    parser.add_argument("trainer", choices=TRAINERS)
    parser.add_argument("graph")
    parser.add_argument("seed", type=int)
    parser.add_argument("out", help="the rows go here (.npy)")
    for name, default in SETTINGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    args = parser.parse_args(argv)
    cli.apply_allocator(args)  # the parent's settings, inherited through the environment
    import torch
    from deepwalk_panel import load

    from graphemb.skipgram import TrainingDiverged

    # graphemb's threads are its own (one per worker); torch's intra-op threads would only
    # add synchronisation to the walker's small products, for every trainer alike.
    torch.set_num_threads(1)
    graph, _ = load(args.graph, args.seed)
    result: dict[str, object] = {"pid": os.getpid(), "diverged": False, "message": ""}
    start = time.perf_counter()
    try:
        if args.trainer == "gensim":
            table, seconds = run_gensim(graph, args, args.seed)
        else:
            table, seconds = run_graphemb(graph, args, args.trainer, args.seed)
        np.save(args.out, table)
    except TrainingDiverged as error:  # counted by the panel's verdicts: a default run must not
        seconds = time.perf_counter() - start
        result |= {"diverged": True, "message": str(error)}
    fresh.emit({**result, "seconds": seconds})


if __name__ == "__main__":
    main()
