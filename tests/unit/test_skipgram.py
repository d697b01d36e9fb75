"""Skip-gram with negative sampling (graphemb.skipgram) and the F1 evaluation helper.

Oracles: a dense float64 skip-gram written with explicit loops over walk positions and
autograd (gradients and loss); brute-force context pairs; the exact degree ** 0.75
distribution (chi-square); one process on the union batch for N ranks (shared memory and
partitioned); on a planted-community graph, communities recovered far above chance.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _multiprocess import run_ranks
from helpers import DEVICES
from scipy import stats

import graphemb.evaluation as evaluation
from graphemb import NodeEmbedding, Partition
from graphemb.datasets import stochastic_block_model
from graphemb.evaluation import format_f1_table, node_classification_f1, split_f1
from graphemb.graph import Graph
from graphemb.optim import SparseAdagrad, SparseAdam, SparseSGD
from graphemb.sampling.walks import PAD, RandomWalker
from graphemb.skipgram import (
    NegativeSampler,
    SkipGram,
    context_pairs,
    dynamic_radii,
    keep_probabilities,
    subsample_walks,
    train_node_embeddings,
)

NUM, DIM, WINDOW, K = 12, 5, 2, 3


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def tiny_walks() -> tuple[torch.Tensor, torch.Tensor]:
    """Walks with repeats, PAD tails, and a walk whose only node is in no pair (node 11)."""
    walks = torch.tensor(
        [
            [0, 1, 2, 1, 3, 4],
            [5, 6, 5, 7, PAD, PAD],
            [8, 9, PAD, PAD, PAD, PAD],
            [11, PAD, PAD, PAD, PAD, PAD],
            [2, 3, 4, 10, 4, 0],
        ]
    )
    negatives = torch.randint(0, 11, (*walks.shape, K), generator=torch.Generator().manual_seed(1))
    return walks, negatives


def dense_reference(center: torch.Tensor, context: torch.Tensor, walks, negatives, window):
    """SGNS loss written position by position, float64, every pair and negative explicit."""
    terms, pairs = [], 0
    rows, length = walks.shape
    for w in range(rows):
        for i in range(length):
            c = int(walks[w, i])
            if c == PAD:
                continue
            for j in range(max(0, i - window), min(length, i + window + 1)):
                o = int(walks[w, j])
                if j == i or o == PAD:
                    continue
                terms.append(F.logsigmoid(center[c] @ context[o]))
                for n in negatives[w, i].tolist():
                    terms.append(F.logsigmoid(-(center[c] @ context[n])))
                pairs += 1
    return -torch.stack(terms).sum() / pairs


def initial_tables(seed=0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(NUM, DIM, generator=gen, dtype=torch.float64) * 0.5,
        torch.randn(NUM, DIM, generator=gen, dtype=torch.float64) * 0.5,
    )


def sgd_gradients(model: SkipGram, loss_fn) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(center grad, context grad, loss): SparseSGD with lr 1 moves each row by -grad."""
    before = [e.all_get_embedding() for e in model.embeddings]
    loss = loss_fn()
    loss.backward()
    SparseSGD(model.embeddings, lr=1.0).step()
    after = [e.all_get_embedding() for e in model.embeddings]
    return before[0] - after[0], before[1] - after[1], loss.item()


def float64_model(name: str, device="cpu") -> SkipGram:
    model = SkipGram(
        NUM, DIM, window=WINDOW, name=name, dtype=torch.float64, device=device, sharing="position"
    )
    center, context = initial_tables()
    model.center.all_set_embedding(center)
    model.context.all_set_embedding(context)
    return model


# ---------------------------------------------------------------------------- pairs, noise
def test_context_pairs_are_every_pair_within_the_window():
    walks, _ = tiny_walks()
    for window in (1, 2, 7):
        centers, contexts = context_pairs(walks, window)
        expected = Counter()
        for row in walks.tolist():
            for i, a in enumerate(row):
                for j, b in enumerate(row):
                    if a != PAD and b != PAD and 0 < abs(i - j) <= window:
                        expected[(a, b)] += 1
        assert Counter(zip(centers.tolist(), contexts.tolist(), strict=True)) == expected
        assert SkipGram.num_pairs(walks, window) == sum(expected.values())


def test_negatives_follow_degree_to_the_three_quarters():
    src = torch.tensor([0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 4])
    dst = torch.tensor([1, 2, 3, 4, 0, 2, 0, 0, 1, 2, 0])
    graph = Graph.from_edges(src, dst, num_nodes=6)  # node 5: no in-edges, never drawn
    sampler = NegativeSampler.from_graph(graph)
    draws = sampler((40000,), generator=torch.Generator().manual_seed(0))
    counts = np.bincount(draws.numpy(), minlength=6)
    in_degree = np.bincount(dst.numpy(), minlength=6).astype(float)
    expected = in_degree**0.75 / (in_degree**0.75).sum()
    assert counts[5] == 0
    assert stats.chisquare(counts[:5], expected[:5] * counts.sum()).pvalue > 1e-3
    # the test can tell power 0.75 from power 1 at this sample size
    wrong = in_degree / in_degree.sum()
    assert stats.chisquare(counts[:5], wrong[:5] * counts.sum()).pvalue < 1e-6
    assert sampler((2, 3, 4)).shape == (2, 3, 4)


@pytest.mark.parametrize("shape", ["power-law", "one-hub", "uniform", "single"])
def test_alias_table_gives_every_node_exactly_its_probability(shape):
    """The distribution the table implies -- column c drawn with 1/n, kept with keep[c],
    else its alias -- equals the sampler's probabilities (float64, exact up to rounding),
    zero-weight nodes included (never drawn)."""
    gen = torch.Generator().manual_seed(5)
    weights = {
        "power-law": (1 / torch.rand(3000, generator=gen, dtype=torch.float64)) ** 1.5,
        "one-hub": torch.cat([torch.full((1,), 5000.0), torch.ones(999)]).double(),
        "uniform": torch.ones(7, dtype=torch.float64),
        "single": torch.tensor([0.0, 2.0, 0.0]),
    }[shape]
    if shape == "power-law":
        weights[::7] = 0.0
    sampler = NegativeSampler(weights)
    columns = sampler._nodes.numel()
    implied = torch.zeros_like(sampler.probabilities)
    implied.index_add_(0, sampler._nodes, sampler._keep / columns)
    implied.index_add_(0, sampler._alias_nodes, (1 - sampler._keep) / columns)
    torch.testing.assert_close(implied, sampler.probabilities, rtol=0, atol=1e-12)
    assert bool((implied[weights == 0] == 0).all())


@pytest.mark.parametrize(
    "weights, power, error, message",
    [
        (torch.tensor([1.0, -1.0]), 0.75, ValueError, r"weights\[1\] = -1.0"),
        (torch.zeros(3), 0.75, ValueError, "all zero"),
        (torch.tensor([1.0, float("nan")]), 0.75, ValueError, "finite"),
        (torch.ones(2, 2), 0.75, TypeError, "1-dimensional"),
        (torch.ones(3), -1.0, ValueError, "power"),
        (torch.tensor([True, False]), 0.75, TypeError, "real numbers"),
    ],
)
def test_sampler_refuses_bad_weights(weights, power, error, message):
    with pytest.raises(error, match=message):
        NegativeSampler(weights, power)


# ---------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("device", DEVICES)
def test_walk_loss_and_gradients_match_a_dense_float64_reference(device):
    walks, negatives = tiny_walks()
    center, context = (t.clone().requires_grad_() for t in initial_tables())
    reference = dense_reference(center, context, walks, negatives, WINDOW)
    reference.backward()

    model = float64_model(f"grad-walks-{device}", device)
    d_center, d_context, loss = sgd_gradients(
        model, lambda: model(walks.to(device), negatives.to(device))
    )
    assert loss == pytest.approx(reference.item(), rel=1e-12)
    torch.testing.assert_close(d_center, center.grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(d_context, context.grad, rtol=1e-9, atol=1e-12)
    assert d_center.abs().sum() > 0 and d_context.abs().sum() > 0


def test_pair_loss_matches_the_reference_with_negatives_per_pair():
    walks, negatives = tiny_walks()
    # Every pair of positions (positions play the node ids), kept where both hold a node;
    # each pair gets the negatives of its center position.
    rows, length = walks.shape
    flat = walks.reshape(-1)
    center_at, context_at = context_pairs(torch.arange(rows * length).view(rows, length), WINDOW)
    valid = (flat[center_at] != PAD) & (flat[context_at] != PAD)
    centers, contexts = flat[center_at[valid]], flat[context_at[valid]]
    pair_negatives = negatives.reshape(-1, K)[center_at[valid]]
    assert centers.numel() == SkipGram.num_pairs(walks, WINDOW)

    center, context = (t.clone().requires_grad_() for t in initial_tables())
    dense_reference(center, context, walks, negatives, WINDOW).backward()
    model = float64_model("grad-pairs")
    d_center, d_context, _ = sgd_gradients(
        model, lambda: model.pair_loss(centers, contexts, pair_negatives)
    )
    torch.testing.assert_close(d_center, center.grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(d_context, context.grad, rtol=1e-9, atol=1e-12)


def test_rows_in_no_pair_are_not_touched_by_adam():
    """Node 11 walks alone (no pair): Adam must neither move its row nor count a step."""
    walks, negatives = tiny_walks()
    model = float64_model("untouched")
    opt = SparseAdam(model.embeddings, lr=0.1)
    before = model.center.all_get_embedding()
    model(walks, negatives).backward()
    opt.step()
    steps = opt.state_dict()["state"][0]["step"]
    assert torch.equal(model.center.all_get_embedding()[11], before[11])
    assert int(steps.view(-1)[11]) == 0 and int(steps.view(-1)[0]) == 1


def test_batch_negatives_are_looked_up_only_for_blocks_serving_a_pair():
    """sharing="batch": block b serves center t of walk (b - t) % W. Only walk 0 has pairs
    (its centers at t = 0, 1), so blocks 0 and 1 serve a pair and blocks 2, 3 serve none:
    Adam must count a step for the rows of blocks 0 and 1 only."""
    walks = torch.tensor([[0, 1], [5, PAD], [6, PAD], [7, PAD]])
    negatives = torch.tensor([[2], [3], [8], [9]])
    model = SkipGram(NUM, DIM, window=WINDOW, name="batch-blocks", sharing="batch")
    opt = SparseAdam(model.embeddings, lr=0.1)
    model(walks, negatives).backward()
    opt.step()
    steps = opt.state_dict()["state"][1]["step"].view(-1)  # the context table's rows
    assert steps[[0, 1, 2, 3]].tolist() == [1, 1, 1, 1]
    assert steps[[5, 6, 7, 8, 9]].tolist() == [0, 0, 0, 0, 0]


def test_empty_and_pairless_batches_give_zero_loss():
    model = SkipGram(NUM, DIM, window=WINDOW, name="empty", sharing="position")
    for walks in (
        torch.empty(0, 6, dtype=torch.long),
        torch.tensor([[3, PAD, PAD]]),
        torch.tensor([[4]]),
    ):
        negatives = torch.zeros(*walks.shape, K, dtype=torch.long)
        loss = model(walks, negatives)
        assert loss.item() == 0.0
        loss.backward()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda m: m(torch.zeros(2, 3), torch.zeros(2, 3, 1, dtype=torch.long)),
            TypeError,
            "integer",
        ),
        (
            lambda m: m(
                torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, 1, dtype=torch.long)
            ),
            ValueError,
            r"negatives must have shape \(W, T, K\) = \(2, 3, K\)",
        ),
        (
            lambda m: m(torch.zeros(6, dtype=torch.long), torch.zeros(6, 1, dtype=torch.long)),
            ValueError,
            "walks must have shape",
        ),
        (
            lambda m: m(torch.tensor([[0, 99]]), torch.zeros(1, 2, 1, dtype=torch.long)),
            IndexError,
            "node id 99",
        ),
        (
            lambda m: m.pair_loss(
                torch.tensor([0, 1]), torch.tensor([1]), torch.zeros(2, 1, dtype=torch.long)
            ),
            ValueError,
            "one shape",
        ),
        (
            lambda m: m.pair_loss(
                torch.tensor([0]), torch.tensor([1]), torch.zeros(2, 1, dtype=torch.long)
            ),
            ValueError,
            r"negatives must have shape \(P, K\)",
        ),
        (lambda m: SkipGram(NUM, DIM, window=0, name="bad-window"), ValueError, "window"),
        (lambda m: context_pairs(torch.zeros(2, 3, dtype=torch.long), 0), ValueError, "window"),
    ],
)
def test_bad_input_is_refused(call, error, message):
    model = SkipGram(NUM, DIM, window=WINDOW, name="bad-input", sharing="position")
    before = model.center.all_get_embedding()
    with pytest.raises(error, match=message):
        call(model)
    assert torch.equal(model.center.all_get_embedding(), before)


# ---------------------------------------------------------------------------- N ranks
STEPS, LOCAL_WALKS = 4, 3


def rank_batch(step: int, rank: int, world_size: int, graph: Graph):
    """Walks and negatives of ``rank`` at ``step``; the last rank has none at step 2."""
    gen = torch.Generator().manual_seed(100 * step + 10 * rank + world_size)
    count = 0 if (rank == world_size - 1 and step == 2) else LOCAL_WALKS
    start = torch.randint(0, graph.num_nodes, (count,), generator=gen)
    walks = RandomWalker(graph)(start, 5, generator=gen)
    negatives = torch.randint(0, graph.num_nodes, (*walks.shape, K), generator=gen)
    return walks, negatives


def ring_graph() -> Graph:
    nodes = torch.arange(NUM)
    src = torch.cat([nodes, nodes, torch.tensor([0])])
    dst = torch.cat([(nodes + 1) % NUM, (nodes + 5) % NUM, torch.tensor([6])])
    return Graph.from_edges(src, dst, NUM)


OPTIMIZERS = {
    "adam": lambda e: SparseAdam(e, lr=0.05),
    "adagrad": lambda e: SparseAdagrad(e, lr=0.1),
}


def train_skipgram(
    model: SkipGram, optimizer_name: str, rank: int, world_size: int, data_world: int
) -> dict:
    center, context = initial_tables(3)
    model.center.all_set_embedding(center.float())
    model.context.all_set_embedding(context.float())
    opt = OPTIMIZERS[optimizer_name](model.embeddings)
    graph = ring_graph()
    for step in range(STEPS):
        loss = 0
        for data_rank in range(rank, data_world, world_size):  # one process: every batch
            walks, negatives = rank_batch(step, data_rank, data_world, graph)
            loss = loss + model(walks, negatives)
        (loss * world_size / data_world).backward()
        opt.step()
    state = opt.state_dict()["state"]
    return {
        "center": model.center.all_get_embedding(),
        "context": model.context.all_get_embedding(),
        "state": state,
    }


def skipgram_worker(rank, world_size, storage, optimizer_name):
    partition = Partition.remainder(NUM, world_size) if storage == "partitioned" else None
    model = SkipGram(
        NUM,
        DIM,
        window=WINDOW,
        name=f"ranks-{storage}",
        partition=partition,
        timeout=60,
        sharing="position",
    )
    assert model.center.storage_kind == storage
    return train_skipgram(model, optimizer_name, rank, world_size, world_size)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "storage, world_size, optimizer_name", [("shared", 2, "adam"), ("partitioned", 3, "adagrad")]
)
def test_ranks_train_like_one_process_on_the_union(storage, world_size, optimizer_name):
    results = run_ranks(skipgram_worker, world_size, storage, optimizer_name)
    oracle = train_skipgram(
        SkipGram(NUM, DIM, window=WINDOW, name=f"union-{storage}", sharing="position"),
        optimizer_name,
        0,
        1,
        world_size,
    )
    assert not torch.equal(oracle["center"], initial_tables(3)[0].float()), "nothing trained"
    for result in results:
        for key in ("center", "context"):
            torch.testing.assert_close(result[key], oracle[key], rtol=1e-5, atol=1e-6)
        for index, state in oracle["state"].items():
            for name, value in state.items():
                torch.testing.assert_close(
                    result["state"][index][name], value, rtol=1e-5, atol=1e-6
                )


# ---------------------------------------------------------------------------- quality
def train_deepwalk(graph: Graph, dim=32, epochs=4, seed=0, name="sbm") -> SkipGram:
    walker, sampler = RandomWalker(graph), NegativeSampler.from_graph(graph)
    model = SkipGram(graph.num_nodes, dim, window=4, name=name, seed=seed, sharing="position")
    opt = SparseAdam(model.embeddings, lr=0.05)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for batch in torch.randperm(graph.num_nodes, generator=gen).split(50):
            walks = walker(batch, 20, generator=gen)
            model(walks, sampler((*walks.shape, 4), generator=gen)).backward()
            opt.step()
    return model


def test_embeddings_alone_separate_planted_communities():
    data = stochastic_block_model(
        800, num_communities=4, avg_degree=10.0, intra_fraction=0.9, seed=1
    )
    graph = Graph.from_dataset(data)
    untrained = SkipGram(graph.num_nodes, 32, name="sbm-untrained")
    before = node_classification_f1(
        untrained.center.all_get_embedding(), data.labels, (0.5,), repeats=2
    )[0]
    model = train_deepwalk(graph)
    after = node_classification_f1(
        model.center.all_get_embedding(), data.labels, (0.5,), repeats=2
    )[0]
    assert before.micro_f1 < 0.45  # chance: 0.25
    assert after.micro_f1 > 0.9 and after.macro_f1 > 0.9


# ---------------------------------------------------------------------------- evaluation
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


# ---------------------------------------------------------------------------- word2vec mode
def word2vec_reference(center, context, walks, radii, negatives, sharing, num_negatives):
    """Summed SGNS loss, float64, pair by pair as word2vec visits them.

    ``sharing="pair"``: ``negatives[w, t, s]`` are the K draws of the pair of center ``t``
    and offset ``offsets[s]``; ``"walk"``: ``negatives[w]`` serve every center of walk
    ``w``, each weighted ``num_negatives * pairs(t) / M``; ``"batch"``: as ``"walk"``, but
    center ``t`` of walk ``w`` is served by ``negatives[(w + t) % W]``.
    """
    offsets = list(range(-WINDOW, 0)) + list(range(1, WINDOW + 1))
    terms = []
    rows, length = walks.shape
    for w in range(rows):
        for t in range(length):
            c = int(walks[w, t])
            if c == PAD:
                continue
            pairs = 0
            for s, offset in enumerate(offsets):
                j = t + offset
                if not (0 <= j < length) or abs(offset) > int(radii[w, j]):
                    continue
                o = int(walks[w, j])
                if o == PAD:
                    continue
                pairs += 1
                terms.append(F.logsigmoid(center[c] @ context[o]))
                if sharing == "pair":
                    for n in negatives[w, t, s].tolist():
                        terms.append(F.logsigmoid(-(center[c] @ context[n])))
            if sharing in ("walk", "batch") and pairs:
                weight = num_negatives * pairs / negatives.shape[1]
                block = w if sharing == "walk" else (w + t) % rows
                for n in negatives[block].tolist():
                    terms.append(weight * F.logsigmoid(-(center[c] @ context[n])))
    return -torch.stack(terms).sum()


def word2vec_batch(sharing: str, seed: int = 3):
    walks, _ = tiny_walks()
    gen = torch.Generator().manual_seed(seed)
    radii = torch.randint(1, WINDOW + 1, walks.shape, generator=gen)
    shape = (*walks.shape, 2 * WINDOW, K) if sharing == "pair" else (walks.shape[0], 7)
    return walks, radii, torch.randint(0, NUM, shape, generator=gen)


def float64_reference_and_model(walks, radii, negatives, sharing, name):
    """The float64 reference's summed loss and gradients at the initial tables, and a
    float64 ``SkipGram`` holding those tables: ``(loss, center, context, center_grad,
    context_grad, model)``."""
    center, context = initial_tables()
    reference_center = center.clone().requires_grad_()
    reference_context = context.clone().requires_grad_()
    loss = word2vec_reference(
        reference_center, reference_context, walks, radii, negatives, sharing, K
    )
    loss.backward()
    model = SkipGram(
        NUM, DIM, window=WINDOW, name=name, dtype=torch.float64, sharing=sharing, num_negatives=K
    )
    model.center.all_set_embedding(center)
    model.context.all_set_embedding(context)
    return loss, center, context, reference_center.grad, reference_context.grad, model


@pytest.mark.parametrize("sharing", ["pair", "batch", "walk"])
def test_sgd_step_is_word2vecs_update_against_a_float64_reference(sharing):
    walks, radii, negatives = word2vec_batch(sharing)
    expected, center, context, center_grad, context_grad, model = float64_reference_and_model(
        walks, radii, negatives, sharing, f"w2v-{sharing}"
    )
    loss = model(walks, negatives, radii=radii, reduction="sum")
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    lr = 0.1
    summed = model.sgd_step(walks, negatives, lr=lr, radii=radii)
    assert summed == pytest.approx(expected.item(), rel=1e-12)
    torch.testing.assert_close(
        model.center.all_get_embedding(), center - lr * center_grad, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        model.context.all_get_embedding(), context - lr * context_grad, rtol=0, atol=1e-12
    )


# A batch repeated `copies` times: every row occurs `copies` times per lookup. "mean" moves it
# like one copy; "cap:C" by the sum of min(copies, C) copies (of the float64 reference).
@pytest.mark.parametrize(
    ("duplicates", "copies", "copies_moved"),
    [("mean", 3, 1), ("cap:2", 4, 2), ("cap:2", 2, 2), ("cap:8", 3, 3), ("cap:1.5", 3, 1.5)],
)
def test_repeated_rows_move_by_the_duplicates_rule(duplicates, copies, copies_moved):
    walks = torch.tensor([[0, 1, 2, 3, 4]])  # no id repeats within a table's lookups
    radii = torch.tensor([[2, 1, 2, 2, 1]])
    negatives = torch.arange(5, 12).unsqueeze(0)
    _, center, context, center_grad, context_grad, model = float64_reference_and_model(
        walks, radii, negatives, "walk", f"w2v-{duplicates}-{copies}"
    )
    # A step with lr 0 on the same rows first: counts of one step must not leak into the next.
    model.sgd_step(walks, negatives, lr=0.0, radii=radii, duplicates=duplicates)
    model.sgd_step(
        walks.repeat(copies, 1),
        negatives.repeat(copies, 1),
        lr=0.1,
        radii=radii.repeat(copies, 1),
        duplicates=duplicates,
    )
    moved = 0.1 * copies_moved
    torch.testing.assert_close(
        model.center.all_get_embedding(), center - moved * center_grad, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        model.context.all_get_embedding(), context - moved * context_grad, rtol=0, atol=1e-12
    )


def test_a_row_both_context_and_negative_counts_both_occurrences():
    """Walk [0, 1] (radius 1): context rows 0 and 1 once each as contexts; row 1 is also the
    block's negative. With "mean", context row 1 moves by half its summed gradient, every
    other row by its whole gradient (of the float64 reference)."""
    walks, radii, negatives = torch.tensor([[0, 1]]), torch.tensor([[1, 1]]), torch.tensor([[1]])
    _, center, context, center_grad, context_grad, model = float64_reference_and_model(
        walks, radii, negatives, "batch", "ctx-neg"
    )
    model.sgd_step(walks, negatives, lr=0.1, radii=radii, duplicates="mean")
    share = torch.ones(NUM, 1, dtype=torch.float64)
    share[1] = 0.5
    torch.testing.assert_close(
        model.center.all_get_embedding(), center - 0.1 * center_grad, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        model.context.all_get_embedding(), context - 0.1 * share * context_grad, rtol=0, atol=1e-12
    )
    assert context_grad[1].abs().sum() > 0


@pytest.mark.parametrize("duplicates", ["median", "cap:", "cap:x", "cap:0.5", "cap:nan"])
def test_bad_duplicates_rule_is_refused_before_any_change(duplicates):
    walks, radii, negatives = word2vec_batch("batch")
    model = SkipGram(NUM, DIM, window=WINDOW, name=f"bad-dup-{duplicates}", sharing="batch")
    before = [e.all_get_embedding() for e in model.embeddings]
    with pytest.raises(ValueError, match=f"duplicates must be .* got '{re.escape(duplicates)}'"):
        model.sgd_step(walks, negatives, lr=0.1, radii=radii, duplicates=duplicates)
    after = [e.all_get_embedding() for e in model.embeddings]
    assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))
    ring = Graph.from_edges(torch.arange(4), (torch.arange(4) + 1) % 4)
    with pytest.raises(ValueError, match="duplicates must be"):
        train_node_embeddings(ring, dimensions=4, duplicates=duplicates)


@pytest.mark.parametrize("matmul_dtype", ["bf16", "int64", 3])
def test_bad_matmul_dtype_is_refused(matmul_dtype):
    ring = Graph.from_edges(torch.arange(4), (torch.arange(4) + 1) % 4)
    with pytest.raises(ValueError, match=f"matmul_dtype must be .* got {matmul_dtype!r}"):
        train_node_embeddings(ring, dimensions=4, matmul_dtype=matmul_dtype)


def test_bfloat16_products_give_nearly_the_float32_step():
    walks, radii, negatives = word2vec_batch("walk")
    center, context = initial_tables()
    tables = []
    for dtype in (None, torch.bfloat16):
        model = SkipGram(NUM, DIM, window=WINDOW, name=f"bf16-{dtype}", sharing="walk")
        model.center.all_set_embedding(center.float())
        model.context.all_set_embedding(context.float())
        model.sgd_step(walks, negatives, lr=0.1, radii=radii, matmul_dtype=dtype)
        tables.append(model.center.all_get_embedding() - center.float())
    change = tables[0].norm()
    assert change > 0
    assert (tables[1] - tables[0]).norm() < 0.02 * change


def test_trainer_refuses_sharing_pair_and_names_the_compiled_trainer():
    # Per-pair negatives in one synchronous summed step are not word2vec's sequential
    # updates (they collapsed every row on a small dense graph): word2vec's exact
    # algorithm is the compiled trainer, and the torch trainer no longer offers "pair".
    graph = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6)
    with pytest.raises(ValueError, match=r"sharing='pair'.*trainer='compiled'"):
        train_node_embeddings(graph, dimensions=4, sharing="pair", trainer="torch")


def test_dynamic_window_is_uniform_in_one_to_window():
    radii = dynamic_radii((200, 50), 5, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(radii.view(-1), minlength=6)
    assert counts[0] == 0 and int(radii.max()) == 5
    assert stats.chisquare(counts[1:].numpy()).pvalue > 1e-4


def test_learning_rate_decays_linearly_over_all_walks(monkeypatch):
    graph = Graph.from_edges(torch.arange(50), (torch.arange(50) + 1) % 50)
    rates = []

    def record(self, walks, negatives, *, lr, **options):
        rates.append((lr, walks.shape[0]))

    monkeypatch.setattr(SkipGram, "sgd_step", record)
    train_node_embeddings(
        graph,
        dimensions=4,
        walk_length=5,
        num_walks=4,
        window=2,
        batch_walks=10,
        lr=0.025,
        sample=0,
        trainer="torch",
    )
    total = 4 * 50
    done = np.cumsum([0] + [count for _, count in rates[:-1]])
    expected = 0.025 * np.maximum(1 - done / total, 1e-4)
    np.testing.assert_allclose([lr for lr, _ in rates], expected, rtol=1e-12)
    assert sum(count for _, count in rates) == total


def test_subsampling_keeps_tokens_with_word2vecs_probability():
    counts = torch.tensor([1000.0, 100.0, 10.0, 1.0, 0.0])
    sample = 1e-2
    total = float(counts.sum())
    for count, keep in zip(
        counts.tolist(), keep_probabilities(counts, sample).tolist(), strict=True
    ):
        if count == 0:
            continue
        # word2vec.c: ran = (sqrt(cn / (sample * train_words)) + 1) * (sample * train_words) / cn
        ran = (np.sqrt(count / (sample * total)) + 1) * (sample * total) / count
        assert keep == pytest.approx(min(ran, 1.0), rel=1e-12)
    assert keep_probabilities(counts, 0.0).eq(1).all()
    # Empirical: node 0 kept at its rate, the order of kept tokens unchanged.
    keep = torch.tensor([0.3, 1.0, 1.0])
    walks = torch.tensor([[0, 1, 0, 2, 0, 1, PAD]]).repeat(4000, 1)
    kept = subsample_walks(walks, keep, generator=torch.Generator().manual_seed(0))
    zeros = int((kept == 0).sum())
    assert abs(zeros - 0.3 * 12000) < 5 * (12000 * 0.3 * 0.7) ** 0.5
    without_zero = [[v for v in row if v not in (0, PAD)] for row in kept[:50].tolist()]
    assert all(row == [1, 2, 1] for row in without_zero)
    real = kept != PAD
    assert bool((real[:, :-1] >= real[:, 1:]).all())  # PAD only at the end


def test_walks_are_drawn_in_chunks_whose_size_does_not_grow_with_num_walks(monkeypatch):
    from graphemb.sampling import walks as walks_module

    graph = Graph.from_edges(torch.arange(100), (torch.arange(100) + 7) % 100)
    original = walks_module.RandomWalker.__call__
    for num_walks in (1, 6):
        largest, starts = [0], []

        def spy(self, start, walk_length, *, generator=None, largest=largest, starts=starts):
            out = original(self, start, walk_length, generator=generator)
            largest[0] = max(largest[0], out.numel() * out.element_size())
            starts.append(start.clone())
            return out

        monkeypatch.setattr(walks_module.RandomWalker, "__call__", spy)
        train_node_embeddings(
            graph,
            dimensions=4,
            walk_length=9,
            num_walks=num_walks,
            window=2,
            chunk_walks=32,
            batch_walks=16,
            sample=0,
        )
        assert largest[0] == 32 * 9 * 8  # one chunk of int64 walks, whatever num_walks
        per_node = torch.bincount(torch.cat(starts), minlength=100)
        assert bool((per_node == num_walks).all())  # every node starts num_walks walks


def test_trained_embeddings_separate_planted_communities():
    data = stochastic_block_model(600, 4, avg_degree=10.0, intra_fraction=0.9, seed=5)
    graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
    table = train_node_embeddings(
        graph, dimensions=16, walk_length=20, num_walks=20, window=5, seed=0
    )
    scores = node_classification_f1(table, data.labels, [0.5], repeats=2, seed=0)
    assert scores[0].micro_f1 > 0.9  # chance: 0.25


def test_deepwalk_command_writes_a_word2vec_file(tmp_path):
    import argparse

    from graphemb.cli import embed

    (tmp_path / "g.txt").write_text("# ring\nann bob\nbob cy\ncy dan\ndan ann\n")
    parser = argparse.ArgumentParser()
    embed.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "deepwalk",
            "--input",
            str(tmp_path / "g.txt"),
            "--output",
            str(tmp_path / "g.emb"),
            "--dimensions",
            "6",
            "--num-walks",
            "2",
            "--walk-length",
            "5",
            "--quiet",
        ]
    )
    assert args.run(args) == 0
    lines = (tmp_path / "g.emb").read_text().splitlines()
    assert lines[0] == "4 6"
    names = sorted(line.split()[0] for line in lines[1:])
    assert names == ["ann", "bob", "cy", "dan"]
    assert all(len(line.split()) == 7 for line in lines[1:])
    rows = np.array([[float(v) for v in line.split()[1:]] for line in lines[1:]])
    assert np.isfinite(rows).all() and np.abs(rows).sum() > 0
    with pytest.raises(SystemExit):
        parser.parse_args(["node2vec", "--input", "x", "--output", "y", "--p", "0"])
