"""The multi-label scorer against an independent one written here from scikit-learn parts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

from graphemb.evaluation import node_classification_f1, split_f1


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
