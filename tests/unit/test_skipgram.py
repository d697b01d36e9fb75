"""Skip-gram with negative sampling (graphemb.skipgram.SkipGram) and the F1 evaluation helper.

Oracles: a dense float64 skip-gram written with explicit loops over walk positions and
autograd (gradients and loss); one process on the union batch for N ranks (shared memory and
partitioned); on a planted-community graph, communities recovered far above chance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _multiprocess import run_ranks
from helpers import DEVICES
from skipgram_batches import DIM, NUM, WINDOW, K, initial_tables, tiny_walks, walk_centers

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
)

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def dense_reference(center: torch.Tensor, context: torch.Tensor, walks, negatives, window):
    """SGNS loss written position by position, float64, every pair and negative explicit."""
    terms, pairs = [], 0
    length = walks.shape[1]
    for w, i, c in walk_centers(walks):
        for j in range(max(0, i - window), min(length, i + window + 1)):
            o = int(walks[w, j])
            if j == i or o == PAD:
                continue
            terms.append(F.logsigmoid(center[c] @ context[o]))
            for n in negatives[w, i].tolist():
                terms.append(F.logsigmoid(-(center[c] @ context[n])))
            pairs += 1
    return -torch.stack(terms).sum() / pairs


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
