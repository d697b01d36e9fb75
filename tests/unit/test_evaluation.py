"""The multi-label scorer against an independent one written here from scikit-learn parts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

import graphemb.evaluation as evaluation
from graphemb import NodeEmbedding
from graphemb.evaluation import format_f1_table, node_classification_f1, split_f1


def independent_multilabel_f1(features, labels, train, test):
    """One logistic regression per label; a label constant on the training split predicts
    its constant probability; each test node keeps its k most probable labels."""
    probabilities = np.zeros((len(test), labels.shape[1]))
    for label in range(labels.shape[1]):
        target = labels[train, label]
        if target.min() == target.max():
            probabilities[:, label] = float(target[0])
            continue
        model = LogisticRegression(solver="liblinear", max_iter=1000)
        model.fit(features[train], target)
        probabilities[:, label] = model.predict_proba(features[test])[:, 1]
    predicted = np.zeros((len(test), labels.shape[1]), dtype=np.int64)
    for row, node in enumerate(test):
        k = int(labels[node].sum())
        for label in sorted(range(labels.shape[1]), key=lambda c: -probabilities[row, c])[:k]:
            predicted[row, label] = 1
    truth = labels[test]
    return (
        f1_score(truth, predicted, average="micro", zero_division=0),
        f1_score(truth, predicted, average="macro", zero_division=0),
    )


def multilabel_data(seed=0, nodes=300, num_labels=5):
    """Labels readable (noisily) from the features; the last label only on test nodes."""
    rng = np.random.default_rng(seed)
    labels = (rng.random((nodes, num_labels)) < 0.3).astype(np.int64)
    labels[labels.sum(1) == 0, 0] = 1
    features = labels + 0.6 * rng.normal(size=labels.shape)
    order = rng.permutation(nodes)
    train, test = order[: nodes // 5], order[nodes // 5 :]
    labels[train, -1] = 0  # a label absent from the training split
    labels[train[labels[train].sum(1) == 0], 0] = 1
    return features, labels, np.sort(train), np.sort(test)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_label_missing_from_training_is_ranked_last(seed):
    features, labels, train, test = multilabel_data(seed)
    assert labels[train, -1].sum() == 0 and labels[test, -1].sum() > 20

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        micro, macro = split_f1(features, labels, train, test)
    expected_micro, expected_macro = independent_multilabel_f1(features, labels, train, test)

    assert micro == pytest.approx(expected_micro, abs=1e-12)
    assert macro == pytest.approx(expected_macro, abs=1e-12)
    assert micro > 0.6  # ranking the missing label first (the old bug) scores far lower


def test_ratio_scores_match_the_independent_scorer_on_the_documented_splits():
    """``node_classification_f1`` averages the documented splits (seed + r permutations);
    a rare label makes small splits miss it."""
    rng = np.random.default_rng(3)
    labels = (rng.random((250, 4)) < 0.35).astype(np.int64)
    labels[:, 3] = 0
    labels[[5, 77], 3] = 1  # rare: mostly absent from a 10% split
    labels[labels.sum(1) == 0, 0] = 1
    features = labels + 0.6 * rng.normal(size=labels.shape)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = node_classification_f1(features, labels, (0.1,), repeats=3, seed=4)[0]
        expected = []
        for repeat in range(3):
            order = np.random.default_rng(4 + repeat).permutation(250)
            expected.append(independent_multilabel_f1(features, labels, order[:25], order[25:]))

    assert scores.micro_f1 == pytest.approx(np.mean([e[0] for e in expected]), abs=1e-12)
    assert scores.macro_f1 == pytest.approx(np.mean([e[1] for e in expected]), abs=1e-12)


# ------------------------------------------------ the scorer against known answers


def test_f1_of_separable_and_of_uninformative_embeddings():
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (300,), generator=gen)
    separable = F.one_hot(labels, 3).double() + 0.1 * torch.randn(
        300, 3, generator=gen, dtype=torch.float64
    )
    noise = torch.randn(300, 8, generator=gen)
    good = node_classification_f1(separable, labels, (0.2, 0.8), repeats=3)
    bad = node_classification_f1(noise, labels, (0.5,), repeats=3)
    assert [s.micro_f1 for s in good] == [1.0, 1.0] and good[0].num_train == 60
    assert bad[0].micro_f1 < 0.5
    again = node_classification_f1(noise, labels, (0.5,), repeats=3)
    assert again == bad  # seeded splits: the same numbers
    assert "20%" in format_f1_table(good)


def test_multilabel_scores_keep_each_nodes_k_best_labels():
    scores = np.array([[0.1, 0.9, 0.5, 0.3], [0.8, 0.7, 0.6, 0.5], [0.0, 0.2, 0.1, 0.4]])
    k = np.array([2, 1, 3])
    expected = np.zeros_like(scores, dtype=np.int64)
    for row in range(3):  # brute force: the k largest entries
        for column in sorted(range(4), key=lambda c: -scores[row, c])[: k[row]]:
            expected[row, column] = 1
    assert (evaluation._top_k(scores, k) == expected).all()
    # end to end: labels readable from the embeddings give perfect multi-label F1
    gen = np.random.default_rng(0)
    labels = (gen.random((400, 5)) < 0.3).astype(np.int64)
    labels[labels.sum(1) == 0, 0] = 1
    result = node_classification_f1(labels + 0.05 * gen.normal(size=labels.shape), labels, (0.5,))
    assert result[0].micro_f1 == 1.0 and result[0].macro_f1 == 1.0


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"train_ratios": (0.0,)}, ValueError, "train ratios"),
        ({"train_ratios": (1.0,)}, ValueError, "train ratios"),
        ({"train_ratios": (0.001,)}, ValueError, "leaves 0 training"),
        ({"labels": torch.zeros(5, dtype=torch.long)}, ValueError, "labels must have shape"),
        ({"labels": torch.zeros(10)}, ValueError, "labels must be integers"),
        ({"labels": torch.full((10, 2), 2)}, ValueError, "0/1 indicator"),
        ({"embeddings": torch.zeros(10)}, ValueError, "embeddings must have shape"),
        ({"embeddings": [[0.0]] * 10}, TypeError, "embeddings must be a torch.Tensor"),
        ({"nodes": torch.tensor([0, 10])}, ValueError, "node id 10"),
        ({"repeats": 0}, ValueError, "repeats"),
    ],
)
def test_evaluation_refuses_bad_input(kwargs, error, message):
    arguments = {
        "embeddings": torch.randn(10, 4),
        "labels": torch.arange(10) % 2,
        "train_ratios": (0.5,),
        **kwargs,
    }
    with pytest.raises(error, match=message):
        node_classification_f1(**arguments)


def test_tensors_and_numpy_arrays_give_the_same_scores():
    table = NodeEmbedding(10, 4, "eval-input", init_func=lambda t: t.normal_())
    labels = torch.arange(10) % 2
    assert node_classification_f1(
        table.all_get_embedding(), labels, (0.5,)
    ) == node_classification_f1(table.all_get_embedding().numpy(), labels.numpy(), (0.5,))


def test_split_f1_scores_a_given_split():
    gen = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 4, (200,), generator=gen)
    readable = F.one_hot(labels, 4).double()
    train, test = torch.arange(40), torch.arange(40, 200)
    assert split_f1(readable, labels, train, test) == (1.0, 1.0)
    micro, _ = split_f1(torch.randn(200, 6, generator=gen), labels, train, test)
    assert micro < 0.5  # chance: 0.25
    with pytest.raises(ValueError, match="must not be empty"):
        split_f1(readable, labels, train[:0], test)
    with pytest.raises(ValueError, match="test_nodes holds node id 200"):
        split_f1(readable, labels, train, torch.tensor([5, 200]))
    with pytest.raises(ValueError, match="integer node ids"):
        split_f1(readable, labels, train.float(), test)
