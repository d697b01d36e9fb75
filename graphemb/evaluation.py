"""Node classification from frozen embeddings: the DeepWalk / node2vec evaluation protocol.

For each fraction of labelled nodes, a random split trains a one-vs-rest logistic
regression (scikit-learn) on the embeddings of the labelled nodes and scores the rest:
Micro-F1 and Macro-F1, averaged over several random splits.

* **Single-label** (``labels`` of shape ``(N,)``): each node gets the class of highest
  score, so Micro-F1 equals accuracy.
* **Multi-label** (``labels`` of shape ``(N, C)``, 0/1): as in the DeepWalk paper (Perozzi
  et al., 2014), each test node gets its ``k`` most probable labels, where ``k`` is its
  true number of labels. A label that no training node has is never predicted
  (probability 0), however small the training split.

Example
-------
>>> import torch
>>> from graphemb.evaluation import format_f1_table, node_classification_f1
>>> labels = torch.arange(200) % 2
>>> embeddings = torch.stack([labels * 2.0 - 1, torch.randn(200)], 1)   # class in column 0
>>> scores = node_classification_f1(embeddings, labels, train_ratios=(0.1, 0.5), repeats=2)
>>> [(s.train_ratio, s.micro_f1, s.macro_f1) for s in scores]
[(0.1, 1.0, 1.0), (0.5, 1.0, 1.0)]
>>> print(format_f1_table(scores))
labelled  Micro-F1         Macro-F1
     10%  1.0000 ± 0.0000  1.0000 ± 0.0000
     50%  1.0000 ± 0.0000  1.0000 ± 0.0000
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ._checks import as_size

__all__ = ["F1Scores", "format_f1_table", "node_classification_f1", "prediction_f1", "split_f1"]

#: The label fractions of the DeepWalk paper's tables.
DEEPWALK_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Random splits per fraction in the DeepWalk paper's evaluation.
DEEPWALK_REPEATS = 10


@dataclass(frozen=True)
class F1Scores:
    """Scores at one fraction of labelled nodes, mean and standard deviation over splits."""

    train_ratio: float
    micro_f1: float
    macro_f1: float
    micro_f1_std: float
    macro_f1_std: float
    repeats: int
    num_train: int
    num_test: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def node_classification_f1(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    train_ratios: Sequence[float] = (0.1, 0.5, 0.9),
    *,
    repeats: int = 5,
    seed: int = 0,
    nodes: torch.Tensor | np.ndarray | None = None,
    normalize: bool = False,
    max_iter: int = 1000,
) -> list[F1Scores]:
    """Micro/Macro-F1 of one-vs-rest logistic regression on frozen embeddings.

    Parameters
    ----------
    embeddings : Tensor or array, shape (N, D)
        One row per node (e.g. ``NodeEmbedding.all_get_embedding()``).
    labels : Tensor or array of int, shape (N,) or (N, C)
        Class of each node, or a 0/1 indicator matrix for multi-label data.
    train_ratios : sequence of float
        Fractions of the (evaluated) nodes whose labels the classifier sees, each in
        ``(0, 1)``.
    repeats : int
        Random splits per ratio; scores are averaged over them.
    seed : int
        Seeds the splits (split ``r`` of every ratio uses ``seed + r``): the same seed gives
        the same numbers for the same embeddings.
    nodes : Tensor or array of int, optional
        Evaluate on these nodes only (e.g. the labelled ones). Default: every node.
    normalize : bool
        Scale every embedding to unit length first. Off by default, as in the DeepWalk
        protocol (on Cora, raw skip-gram rows score about 3 points of Micro-F1 higher).
    max_iter : int
        Iterations of the logistic regression solver (liblinear, the solver of the
        DeepWalk and node2vec evaluations' scikit-learn versions; one-vs-rest natively).

    Returns
    -------
    list of F1Scores
        One per ratio, in the order given.

    Raises
    ------
    ValueError
        Shapes that do not match, a ratio outside ``(0, 1)``, or a split that would leave
        no training or no test node.
    """
    repeats = as_size("repeats", repeats, minimum=1)
    ratios = [_checked_ratio(r) for r in train_ratios]
    features, targets = _inputs(embeddings, labels, normalize)
    if nodes is not None:
        chosen = _node_ids("nodes", nodes, features.shape[0])
        features, targets = features[chosen], targets[chosen]
    return [_scores_at(ratio, features, targets, repeats, seed, max_iter) for ratio in ratios]


def _scores_at(
    ratio: float,
    features: np.ndarray,
    targets: np.ndarray,
    repeats: int,
    seed: int,
    max_iter: int,
) -> F1Scores:
    """The scores of :func:`node_classification_f1` at one ratio: split ``r`` (of
    ``repeats``) a permutation seeded with ``seed + r``, its first ``ratio`` training."""
    count = features.shape[0]
    num_train = int(round(ratio * count))
    if not 0 < num_train < count:
        raise ValueError(
            f"train ratio {ratio} of {count} nodes leaves {num_train} training and "
            f"{count - num_train} test nodes; both must be > 0"
        )
    micro, macro = [], []
    for repeat in range(repeats):
        order = np.random.default_rng(seed + repeat).permutation(count)
        scores = _fit_and_score(features, targets, order[:num_train], order[num_train:], max_iter)
        micro.append(scores[0])
        macro.append(scores[1])
    return F1Scores(
        train_ratio=ratio,
        micro_f1=float(np.mean(micro)),
        macro_f1=float(np.mean(macro)),
        micro_f1_std=float(np.std(micro)),
        macro_f1_std=float(np.std(macro)),
        repeats=repeats,
        num_train=num_train,
        num_test=count - num_train,
    )


def split_f1(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    train_nodes: torch.Tensor | np.ndarray,
    test_nodes: torch.Tensor | np.ndarray,
    *,
    normalize: bool = False,
    max_iter: int = 1000,
) -> tuple[float, float]:
    """Micro-F1 and Macro-F1 on a given split, e.g. a dataset's public one.

    The same classifier and scoring as :func:`node_classification_f1`; for single-label
    data Micro-F1 is the accuracy on ``test_nodes``.

    Parameters
    ----------
    embeddings : Tensor or array, shape (N, D)
    labels : Tensor or array of int, shape (N,) or (N, C)
    train_nodes, test_nodes : Tensor or array of int, shape (n_train,) and (n_test,)
        Nodes whose labels train the classifier, and nodes scored; both non-empty.
    normalize, max_iter
        As for :func:`node_classification_f1`.

    Returns
    -------
    (micro_f1, macro_f1) : tuple of float

    Examples
    --------
    >>> labels = torch.arange(100) % 2
    >>> split_f1(labels[:, None] * 2.0 - 1, labels, torch.arange(10), torch.arange(10, 100))
    (1.0, 1.0)
    """
    features, targets = _inputs(embeddings, labels, normalize)
    train = _node_ids("train_nodes", train_nodes, features.shape[0])
    test = _node_ids("test_nodes", test_nodes, features.shape[0])
    if not train.size or not test.size:
        raise ValueError(
            f"train_nodes and test_nodes must not be empty, got {train.size} and {test.size}"
        )
    return _fit_and_score(features, targets, train, test, max_iter)


def prediction_f1(
    scores: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray
) -> tuple[float, float]:
    """Micro-F1 and Macro-F1 of a model's class scores (e.g. a GNN's logits).

    Single-label: the class of highest score is predicted (Micro-F1 = accuracy).
    Multi-label: each node's ``k`` highest-scoring labels, ``k`` its true number of labels
    (as :func:`node_classification_f1` does with probabilities).

    Parameters
    ----------
    scores : Tensor or array of float, shape (n, C)
    labels : Tensor or array of int, shape (n,) or (n, C) (0/1)

    Returns
    -------
    (micro_f1, macro_f1) : tuple of float

    Examples
    --------
    >>> scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.3, 0.1]])
    >>> prediction_f1(scores, np.array([[1, 0, 1], [1, 0, 0]]))  # top 2, then top 1
    (0.6666666666666666, 0.5555555555555555)
    """
    from sklearn.metrics import f1_score

    values = _as_numpy("scores", scores).astype(np.float64, copy=False)
    truth = _as_numpy("labels", labels)
    if values.ndim != 2 or truth.shape[0] != values.shape[0]:
        raise ValueError(
            f"scores must have shape (n, C) and labels (n,) or (n, C), got {values.shape} "
            f"and {truth.shape}"
        )
    if truth.ndim == 2:
        predicted = _top_k(values, truth.sum(axis=1))
    else:
        predicted = values.argmax(axis=1)
    return (
        float(f1_score(truth, predicted, average="micro", zero_division=0)),
        float(f1_score(truth, predicted, average="macro", zero_division=0)),
    )


def format_f1_table(scores: Sequence[F1Scores]) -> str:
    """A plain-text table: one line per ratio, mean ± standard deviation."""
    lines = ["labelled  Micro-F1         Macro-F1"]
    for s in scores:
        lines.append(
            f"{s.train_ratio:8.0%}  {s.micro_f1:.4f} ± {s.micro_f1_std:.4f}  "
            f"{s.macro_f1:.4f} ± {s.macro_f1_std:.4f}"
        )
    return "\n".join(lines)


def _inputs(embeddings: Any, labels: Any, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Checked float64 features (unit rows if ``normalize``) and integer labels."""
    features = _as_numpy("embeddings", embeddings).astype(np.float64, copy=False)
    targets = _as_numpy("labels", labels)
    if features.ndim != 2:
        raise ValueError(f"embeddings must have shape (N, D), got {features.shape}")
    if targets.ndim not in (1, 2) or targets.shape[0] != features.shape[0]:
        raise ValueError(
            f"labels must have shape (N,) or (N, C) with N = {features.shape[0]}, got "
            f"{targets.shape}"
        )
    if targets.dtype.kind not in "iub":
        raise ValueError(f"labels must be integers, got dtype {targets.dtype}")
    if targets.ndim == 2 and not np.isin(targets, (0, 1)).all():
        raise ValueError("multi-label labels must be a 0/1 indicator matrix")
    if normalize:
        norms = np.linalg.norm(features, axis=1, keepdims=True)
        features = features / np.maximum(norms, 1e-12)
    return features, targets


def _fit_and_score(
    features: np.ndarray, targets: np.ndarray, train: np.ndarray, test: np.ndarray, max_iter: int
) -> tuple[float, float]:
    """(Micro-F1, Macro-F1) of one-vs-rest logistic regression trained on ``train``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.multiclass import OneVsRestClassifier

    classifier = OneVsRestClassifier(LogisticRegression(solver="liblinear", max_iter=max_iter))
    with warnings.catch_warnings():
        # A label absent from a small training split: sklearn predicts it never.
        warnings.filterwarnings("ignore", message="Label .* is present in all")
        classifier.fit(features[train], targets[train])
        if targets.ndim == 2:
            # Probabilities, not decision values: a label absent from the training split
            # gets a constant predictor whose decision value 0 would outrank every real
            # (negative) score; its probability 0 ranks it last.
            probabilities = classifier.predict_proba(features[test])
        else:
            scores = classifier.decision_function(features[test])
    if targets.ndim == 2:  # multi-label: each node's k most probable labels, k = its count
        predicted = _top_k(probabilities, targets[test].sum(axis=1))
    else:
        classes = classifier.classes_
        scores = scores.reshape(len(test), -1)
        if len(classes) == 2 and scores.shape[1] == 1:  # binary: one score column
            predicted = classes[(scores[:, 0] > 0).astype(np.int64)]
        else:
            predicted = classes[np.argmax(scores, axis=1)]
    truth = targets[test]
    return (
        float(f1_score(truth, predicted, average="micro", zero_division=0)),
        float(f1_score(truth, predicted, average="macro", zero_division=0)),
    )


def _node_ids(name: str, nodes: Any, num_nodes: int) -> np.ndarray:
    chosen = _as_numpy(name, nodes)
    if chosen.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer node ids, got dtype {chosen.dtype}")
    chosen = chosen.astype(np.int64).reshape(-1)
    if chosen.size and (chosen.min() < 0 or chosen.max() >= num_nodes):
        bad = chosen.min() if chosen.min() < 0 else chosen.max()
        raise ValueError(f"{name} holds node id {bad}, outside [0, {num_nodes})")
    return chosen


def _top_k(scores: np.ndarray, k: np.ndarray) -> np.ndarray:
    """0/1 matrix with the ``k[i]`` highest entries of each row of ``scores`` set."""
    rank = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1, kind="stable")
    return (rank < k[:, None]).astype(np.int64)


def _as_numpy(name: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(value).__name__}")


def _checked_ratio(ratio: object) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        raise ValueError(f"train ratios must be numbers in (0, 1), got {ratio!r}")
    value = float(ratio)
    if not (0.0 < value < 1.0) or math.isnan(value):
        raise ValueError(f"train ratios must be numbers in (0, 1), got {ratio!r}")
    return value
