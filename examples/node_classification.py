"""Node classification with GraphSAGE and learnable node embeddings (one process).

Every node gets a learnable row of a :class:`graphemb.NodeEmbedding`, concatenated with its
features (or alone, ``--no-features``), fed to a GraphSAGE trained on mini-batches sampled
by DGL's ``NeighborSampler``. The embedding is trained by graphemb's ``SparseAdam`` (only
the rows of each batch's input nodes change), the dense layers by ``torch.optim.Adam``.

Usage (dgl stack)::

    python examples/node_classification.py                       # Cora, features + embeddings
    python examples/node_classification.py --no-features         # embeddings only
    python examples/node_classification.py --dataset sbm --no-features
    python examples/node_classification.py --checkpoint runs/cora.ckpt --epochs 50
    python examples/node_classification.py --checkpoint runs/cora.ckpt --epochs 100 --resume
    python examples/node_classification.py --quick               # a few epochs (CI)

The last line printed is ``RESULT {json}`` with the validation and test accuracy (test
accuracy at the epoch of best validation accuracy, and at the last epoch) and chance level.
``examples/multi_gpu_graphsage.py`` runs the same training on several processes and
reuses this file's helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tqdm import tqdm  # noqa: E402

import graphemb  # noqa: E402
from graphemb import NodeEmbedding  # noqa: E402
from graphemb.datasets import load_planetoid, stochastic_block_model  # noqa: E402
from graphemb.nn import GraphSAGE, to_dgl_graph  # noqa: E402
from graphemb.optim import SparseAdam  # noqa: E402

# DGL suggests a CPU-affinity tweak on every DataLoader it creates: not an error, only noise.
warnings.filterwarnings("ignore", message=".*CPU affinity.*")

DEFAULT_EPOCHS = 50
EMB_LR_ALONE = 0.01
EMB_LR_WITH_FEATURES = 3e-4
# Short mode for CI: few epochs, a few seconds of training.
QUICK_EPOCHS = 10


# ---------------------------------------------------------------------------- arguments
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except the None and False of options whose help explains them."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """Options shared by both examples."""
    parser = argparse.ArgumentParser(
        description=description or __doc__.split("\n\n")[0],
        formatter_class=_HelpFormatter,
    )
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", choices=["cora", "citeseer", "sbm"], default="cora",
                      help="Planetoid citation graph, or a synthetic stochastic block model")
    data.add_argument("--no-features", action="store_true",
                      help="learn from the embeddings alone (sbm has no features anyway)")
    data.add_argument("--sbm-nodes", type=int, default=5000, help="nodes of the sbm graph")
    data.add_argument("--sbm-communities", type=int, default=5,
                      help="communities (= classes) of the sbm graph")

    model = parser.add_argument_group("model")
    model.add_argument("--emb-dim", type=int, default=32,
                       help="embedding size (0: no embedding, features only, for comparison)")
    model.add_argument("--hidden", type=int, default=64, help="hidden layer size")
    model.add_argument("--fanouts", default="10,10",
                       help="neighbours sampled per layer, comma-separated (one per layer)")
    model.add_argument("--dropout", type=float, default=0.5, help="dropout of every layer's input")

    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=None,
                       help=f"training epochs (default: {DEFAULT_EPOCHS}, {QUICK_EPOCHS} with --quick)")
    train.add_argument("--batch-size", type=int, default=32,
                       help="training nodes per step (the global batch with several processes)")
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate, dense layers")
    train.add_argument("--weight-decay", type=float, default=5e-4,
                       help="Adam weight decay, dense layers")
    train.add_argument("--emb-lr", type=float, default=None,
                       help=f"SparseAdam learning rate, embedding (default: {EMB_LR_ALONE} for "
                       f"embeddings alone, {EMB_LR_WITH_FEATURES} beside features, which carry most "
                       "of the signal: a fast embedding would memorise the few training nodes)")
    train.add_argument("--seed", type=int, default=0,
                       help="seeds the model, shuffling, sampling, dropout (and the sbm graph)")
    train.add_argument("--eval-batch-size", type=int, default=1024,
                       help="nodes per evaluation batch (all neighbours, no sampling)")
    train.add_argument("--num-threads", type=int, default=1,
                       help="CPU threads per process (torch and DGL); Cora's batches are too "
                       "small for more to pay off, and idle threads spinning against other "
                       "processes made a run 10x slower on a busy 2-core machine")
    train.add_argument("--log-every", type=int, default=10, help="print a line every N epochs")
    train.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    train.add_argument("--quick", action="store_true",
                       help=f"short run for CI: {QUICK_EPOCHS} epochs unless --epochs is given, a line per epoch")

    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint", type=Path, default=None,
                      help="save embedding, optimizers and model here after every epoch")
    ckpt.add_argument("--resume", action="store_true",
                      help="continue from --checkpoint (model, optimizers, epoch, best accuracy)")
    return parser


def finish_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Apply ``--quick`` and check what argparse cannot."""
    if args.emb_lr is None:
        alone = args.no_features or args.dataset == "sbm"
        args.emb_lr = EMB_LR_ALONE if alone else EMB_LR_WITH_FEATURES
    if args.epochs is None:
        args.epochs = QUICK_EPOCHS if args.quick else DEFAULT_EPOCHS
    if args.quick:
        args.log_every = 1
    try:
        args.fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        parser.error(f"--fanouts must be comma-separated integers, got {args.fanouts!r}")
    if not args.fanouts or not all(f >= 1 or f == -1 for f in args.fanouts):
        parser.error("--fanouts needs positive integers (or -1 for all neighbours)")
    if args.resume and args.checkpoint is None:
        parser.error("--resume needs --checkpoint PATH")
    if args.resume and not args.checkpoint.exists():
        parser.error(f"--resume: no checkpoint at {args.checkpoint}")
    if args.epochs < 0:
        parser.error("--epochs must be >= 0")
    if args.emb_dim < 0:
        parser.error("--emb-dim must be >= 0")
    if args.emb_dim == 0 and (args.no_features or args.dataset == "sbm"):
        parser.error("--emb-dim 0 needs features: the model would have no input")
    if args.emb_dim == 0 and args.checkpoint is not None:
        parser.error("--checkpoint saves the embedding: it needs --emb-dim > 0")
    return args


# ---------------------------------------------------------------------------- data and model
def load_graph(args: argparse.Namespace) -> tuple[dgl.DGLGraph, int]:
    """The graph with ``ndata`` feat (unless --no-features), label and split masks.

    Returns the graph and its number of classes.
    """
    if args.dataset == "sbm":
        data = stochastic_block_model(
            args.sbm_nodes, num_communities=args.sbm_communities, seed=args.seed
        )
    else:
        data = load_planetoid(args.dataset)
    graph = to_dgl_graph(data)
    if args.no_features:
        graph.ndata.pop("feat", None)
    return graph, data.num_classes


def make_embedding(args: argparse.Namespace, num_nodes: int, **kwargs: Any) -> NodeEmbedding | None:
    """The learnable table (``None`` for ``--emb-dim 0``).

    Rows start at zero (the default of graphemb and DGL): a node has no identity of its own
    at first, and its row moves towards the classes of the training nodes it is sampled
    next to, much like label propagation. Random initial rows would be noise that the
    model can fit the 140 training nodes of Cora with (measured: about 4 points of test
    accuracy lost with features, 6 without).
    """
    if args.emb_dim == 0:
        return None
    return NodeEmbedding(num_nodes, args.emb_dim, "node_embedding", **kwargs)


def make_model(
    args: argparse.Namespace, graph: dgl.DGLGraph, num_classes: int, embedding: NodeEmbedding
) -> GraphSAGE:
    num_features = graph.ndata["feat"].shape[1] if "feat" in graph.ndata else 0
    torch.manual_seed(args.seed)  # same dense initialisation in every process
    return GraphSAGE(
        embedding,
        num_features=num_features,
        hidden_size=args.hidden,
        num_classes=num_classes,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
    )


def seed_epoch(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed shuffling, sampling and dropout per epoch: a resumed run repeats the same epochs."""
    epoch_seed = (seed * 1_000_003 + epoch * 1_009 + rank) % 2**31
    torch.manual_seed(epoch_seed)  # dropout
    np.random.seed(epoch_seed)  # DGL's DataLoader shuffles with numpy
    dgl.seed(epoch_seed)  # neighbour sampling


def train_loader(
    graph: dgl.DGLGraph,
    train_nodes: torch.Tensor,
    args: argparse.Namespace,
    device: torch.device,
    *,
    use_ddp: bool = False,
    batch_size: int | None = None,
) -> dgl.dataloading.DataLoader:
    """Mini-batches of ``train_nodes`` with ``args.fanouts`` sampled neighbours per layer.

    Made anew every epoch, after :func:`seed_epoch`: the shuffle then depends on the epoch
    only, so a resumed run sees the batches an uninterrupted one would. With ``use_ddp``
    each rank gets its own share of the nodes, and every rank the same number of batches.
    """
    sampler = dgl.dataloading.NeighborSampler(args.fanouts)
    return dgl.dataloading.DataLoader(
        graph, train_nodes, sampler, device=device, use_ddp=use_ddp, ddp_seed=args.seed,
        batch_size=batch_size or args.batch_size, shuffle=True,
    )


def train_epoch(
    model: torch.nn.Module,
    loader: dgl.dataloading.DataLoader,
    labels: torch.Tensor,
    dense_opt: torch.optim.Optimizer,
    sparse_opt: SparseAdam | None,
) -> float:
    """One pass over ``loader``; returns the mean loss of its batches.

    ``model`` may be wrapped in ``DistributedDataParallel``: both optimizers' steps are then
    collective, and every rank must see the same number of batches.
    """
    model.train()
    total_loss, steps = 0.0, 0
    for _, output_nodes, blocks in loader:
        loss = F.cross_entropy(model(blocks), labels[output_nodes.cpu()].to(blocks[-1].device))
        dense_opt.zero_grad()
        loss.backward()  # dense gradients into .grad, embedding-row gradients into the trace
        dense_opt.step()
        if sparse_opt is not None:
            sparse_opt.step()  # updates only the rows this batch looked up
        total_loss, steps = total_loss + loss.item(), steps + 1
    return total_loss / max(1, steps)


def epoch_line(epoch: int, loss: float, accuracy: dict[str, float]) -> str:
    return (f"epoch {epoch:3d}  loss {loss:.4f}  "
            f"val {accuracy['val']:.4f}  test {accuracy['test']:.4f}")


@torch.no_grad()
def evaluate(
    model: GraphSAGE,
    graph: dgl.DGLGraph,
    nodes: dict[str, torch.Tensor],
    batch_size: int,
    device: torch.device,
    *,
    use_ddp: bool = False,
) -> dict[str, float]:
    """Accuracy on each set of ``nodes``, with every neighbour of every layer (no sampling).

    With ``use_ddp`` (collective) each rank predicts a share of the nodes and every rank
    returns the accuracy over all of them. Returns ``{name: accuracy}``.
    """
    model.eval()
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(model.num_layers)
    labels = graph.ndata["label"]
    accuracy = {}
    for name, ids in nodes.items():
        # One flag per node: DGL pads the ranks' shares to one length with repeated nodes,
        # which a flag counts once; a MAX all-reduce then merges the shares.
        correct = torch.zeros(graph.num_nodes(), dtype=torch.int32)
        loader = dgl.dataloading.DataLoader(
            graph, ids, sampler, batch_size=batch_size, device=device, use_ddp=use_ddp
        )
        for _, output_nodes, blocks in loader:
            output_nodes = output_nodes.cpu()
            predicted = model(blocks).argmax(dim=1).cpu()
            correct[output_nodes] = (predicted == labels[output_nodes]).int()
        if use_ddp:
            merged = correct.to(device)
            dist.all_reduce(merged, op=dist.ReduceOp.MAX)
            correct = merged.cpu()
        accuracy[name] = int(correct[ids].sum()) / max(1, len(ids))
    model.train()
    return accuracy


def split_nodes(graph: dgl.DGLGraph, split: str) -> torch.Tensor:
    return torch.nonzero(graph.ndata[f"{split}_mask"]).squeeze(1)


class Best:
    """Test accuracy at the epoch of best validation accuracy."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self.epoch = int(state.get("epoch", 0))
        self.val = float(state.get("val", -1.0))
        self.test = float(state.get("test", 0.0))

    def update(self, epoch: int, accuracy: dict[str, float]) -> None:
        if accuracy["val"] > self.val:
            self.epoch, self.val, self.test = epoch, accuracy["val"], accuracy["test"]

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "val": self.val, "test": self.test}


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
    epoch: int,
    best: Best,
) -> None:
    """Everything needed to resume after ``epoch``; collective with a process group."""
    if embedding.rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
    extra = {
        "epoch": epoch,
        "model": model.state_dict(),
        "dense_optimizer": dense_opt.state_dict(),
        "best": best.state(),
    }
    graphemb.save(path, [embedding], sparse_opt, extra=extra)


def load_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
) -> tuple[int, Best]:
    """Restore a checkpoint; returns the last finished epoch and the best accuracy so far."""
    extra = graphemb.load(path, [embedding], sparse_opt)["extra"]
    model.load_state_dict(extra["model"])
    dense_opt.load_state_dict(extra["dense_optimizer"])
    return int(extra["epoch"]), Best(extra["best"])


def result_line(args: argparse.Namespace, num_classes: int, best: Best,
                last: dict[str, float], seconds: float, **more: Any) -> str:
    """The parseable last line: ``RESULT {json}``."""
    return "RESULT " + json.dumps({
        "dataset": args.dataset,
        "features": not args.no_features and args.dataset != "sbm",
        "emb_dim": args.emb_dim,
        "epochs": args.epochs,
        "seed": args.seed,
        "best_epoch": best.epoch,
        "val_acc": round(best.val, 4),
        "test_acc": round(best.test, 4),
        "final_val_acc": round(last.get("val", float("nan")), 4),
        "final_test_acc": round(last.get("test", float("nan")), 4),
        "chance": round(1.0 / num_classes, 4),
        "seconds": round(seconds, 1),
        **more,
    })


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = finish_arguments(parser, parser.parse_args(argv))
    started = time.perf_counter()
    torch.set_num_threads(args.num_threads)
    device = torch.device("cpu")

    graph, num_classes = load_graph(args)
    embedding = make_embedding(args, graph.num_nodes())
    model = make_model(args, graph, num_classes, embedding)
    # Two optimizers: model.parameters() are the dense layers only; the embedding is not a
    # parameter, SparseAdam updates the rows that a step looked up.
    dense_opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sparse_opt = SparseAdam([embedding], lr=args.emb_lr) if embedding is not None else None

    first_epoch, best = 1, Best()
    if args.resume:
        done, best = load_checkpoint(args.checkpoint, embedding, sparse_opt, model, dense_opt)
        first_epoch = done + 1
        print(f"RESUMED from {args.checkpoint} after epoch {done} "
              f"(best val {best.val:.4f} at epoch {best.epoch})", flush=True)

    train_nodes = split_nodes(graph, "train")
    eval_nodes = {"val": split_nodes(graph, "val"), "test": split_nodes(graph, "test")}
    inputs = [f"embedding({args.emb_dim})"] if embedding is not None else []
    inputs += [f"features({model.input.num_features})"] if model.input.num_features else []
    print(f"{args.dataset}: {graph.num_nodes()} nodes, {graph.num_edges()} edges, "
          f"{num_classes} classes, {len(train_nodes)} training nodes; input: "
          + " + ".join(inputs), flush=True)

    last: dict[str, float] = {}
    epochs = tqdm(range(first_epoch, args.epochs + 1), desc="epochs", disable=args.no_progress,
                  initial=first_epoch - 1, total=args.epochs, file=sys.stderr)
    for epoch in epochs:
        seed_epoch(args.seed, epoch)
        loader = train_loader(graph, train_nodes, args, device)
        loss = train_epoch(model, loader, graph.ndata["label"], dense_opt, sparse_opt)
        last = evaluate(model, graph, eval_nodes, args.eval_batch_size, device)
        best.update(epoch, last)
        epochs.set_postfix(loss=f"{loss:.3f}", val=f"{last['val']:.3f}")
        if epoch % args.log_every == 0 or epoch in (first_epoch, args.epochs):
            tqdm.write(epoch_line(epoch, loss, last), file=sys.stdout)
        if args.checkpoint is not None:
            save_checkpoint(args.checkpoint, embedding, sparse_opt, model, dense_opt, epoch, best)
    epochs.close()

    if not last:  # nothing left to train (resumed at the end): still report the model
        last = evaluate(model, graph, eval_nodes, args.eval_batch_size, device)
    line = result_line(args, num_classes, best, last, time.perf_counter() - started,
                       start_epoch=first_epoch)
    print(line, flush=True)
    return json.loads(line[len("RESULT "):])


if __name__ == "__main__":
    main()
