"""The compiled Hogwild skip-gram trainer (graphemb_kernels.skipgram_train) against a float64
reference of word2vec's algorithm driven by the same random stream, plus statistical checks
of its windows, subsampling, negatives and learning rate, and divergence errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from skipgram_reference import SplitMix64, keep_of, reference

from graphemb._native.skipgram import SkipGramTrainer, SlotNoise
from graphemb.graph import Graph
from graphemb.skipgram import (
    FINAL_RATE,
    LearningRate,
    NegativeSampler,
    TrainingDiverged,
    train_node_embeddings,
)
from graphemb.skipgram.backends import compiled_kernel
from graphemb.skipgram.backends.compiled import chunk_seed
from graphemb.skipgram.backends.kernel_inputs import slot_plan
from graphemb.skipgram.guard import check_rows

kernel = compiled_kernel()
needs_kernel = pytest.mark.skipif(
    kernel is None, reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)"
)


def test_reference_stream_is_splitmix64():
    # Published first outputs of splitmix64 from state 0.
    rng = SplitMix64(0)
    assert rng.next() == 0xE220A8397B1DCDAF
    assert rng.next() == 0x6E789E6AA1B965F4


def run(
    walks,
    syn0,
    syn1,
    counts,
    noise,
    *,
    window=2,
    negatives=3,
    lr=0.025,
    before=0,
    total=None,
    hold=1,
    threads=1,
    seed=7,
    vector_width=0,
    threshold=0.0,
):
    """The kernel in place on the walks (its binding, as every backend calls it); the
    products computed. A non-finite score fails the test."""
    trainer = SkipGramTrainer(
        syn0, syn1, counts, noise, window, negatives, lr, FINAL_RATE, total or walks.shape[0],
        hold, vector_width=vector_width, subsample_threshold=threshold,
    )  # fmt: skip
    nonfinite, products = trainer(walks.contiguous(), before, threads, seed & (2**64 - 1))
    assert nonfinite == 0
    return products


def check_against_reference(
    walks, syn0, syn1, counts, noise, *, hold=1, vector_width=0, threshold=0.0
):
    """Train in place with the kernel (window 3, 4 negatives, lr 0.5, walks 5.. of 20,
    seed 11) and assert the float64 reference's result; return that result."""
    expected = reference(walks, syn0, syn1, counts, noise, 3, 4, 0.5, 5, 20, 11, hold=hold,
                         threshold=threshold)  # fmt: skip
    run(walks, syn0, syn1, counts, noise, window=3, negatives=4, lr=0.5, before=5, total=20,
        hold=hold, seed=11, vector_width=vector_width, threshold=threshold)  # fmt: skip
    torch.testing.assert_close(syn0.double(), expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(syn1.double(), expected[1], rtol=1e-4, atol=1e-5)
    return expected


@needs_kernel
@pytest.mark.parametrize("vector_width", [0, 4])  # the widest loop of this CPU; 4 floats
# whole vectors (8: one, 32: several, the loops compiled per target count); a tail of scalars
@pytest.mark.parametrize("dim", [8, 32, 13])
@pytest.mark.parametrize("num_nodes", [7, 60])
@pytest.mark.parametrize("sample", [0.0, 0.2])
def test_matches_a_float64_word2vec_reference(sample, num_nodes, dim, vector_width):
    """With 7 nodes and four negatives a context most contexts draw a node twice (trained
    target after target); with 60 nearly all train distinct targets side by side."""
    gen = torch.Generator().manual_seed(3)
    walks = torch.randint(num_nodes, (6, 9), generator=gen)
    walks[1, 6:] = -1  # a short walk
    weights = torch.tensor([3.0, 1, 4, 1, 5, 9, 2], dtype=torch.float64).repeat(9)[:num_nodes]
    alias = NegativeSampler(weights).alias_table
    syn0 = (torch.rand(num_nodes, dim, generator=gen) - 0.5) / dim
    syn1 = torch.rand(num_nodes, dim, generator=gen) * 0.1
    start = syn0.clone()
    expected = check_against_reference(walks, syn0, syn1, weights, alias,
                                       vector_width=vector_width,
                                       threshold=sample * float(weights.sum()))  # fmt: skip
    assert (expected[0] - start.double()).abs().max() > 0.05  # the rows did move


@needs_kernel
def test_working_memory_kept_between_calls_serves_calls_of_any_size():
    """The kernel keeps its threads' working memory between calls (walk plans sized by the
    walk length, window and negatives, scratch rows by the dimension): a one-thread call
    after a two-thread call of its size, and after larger and smaller calls, still matches
    the float64 reference."""
    gen = torch.Generator().manual_seed(5)
    weights = torch.arange(1.0, 61.0, dtype=torch.float64)
    alias = NegativeSampler(weights).alias_table
    for length, window, negatives, dim in [(30, 5, 6, 32), (9, 2, 2, 8), (40, 6, 7, 13)]:
        walks = torch.randint(60, (4, length), generator=gen)
        syn0 = (torch.rand(60, dim, generator=gen) - 0.5) / dim
        syn1 = torch.rand(60, dim, generator=gen) * 0.1
        # a call on two threads first, sized like this one, on copies
        run(walks, syn0.clone(), syn1.clone(), weights, alias, window=window,
            negatives=negatives, threads=2)  # fmt: skip
        expected = reference(walks, syn0, syn1, weights, alias, window, negatives, 0.5, 0, 4,
                             9, hold=1, threshold=0.0)  # fmt: skip
        run(walks, syn0, syn1, weights, alias, window=window, negatives=negatives, lr=0.5,
            total=4, seed=9)  # fmt: skip
        torch.testing.assert_close(syn0.double(), expected[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(syn1.double(), expected[1], rtol=1e-4, atol=1e-5)


def slot_noise(
    degrees: list[int], floor: float | None = None, rejection: bool | None = None
) -> tuple[torch.Tensor, SlotNoise]:
    """An indptr of ``degrees`` and the noise of slots holding node ``v`` ``degrees[v]``
    times in a random order (a graph's neighbour lists hold each node once per in-edge),
    thinned from ``floor`` (default: the backend's choice), the nodes below it drawn by
    ``rejection`` or from an alias table (default: the backend's choice)."""
    degrees_t = torch.tensor(degrees)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees_t.cumsum(0)])
    slots = torch.repeat_interleave(torch.arange(len(degrees)), degrees_t)
    slots = slots[torch.randperm(slots.numel(), generator=torch.Generator().manual_seed(0))]
    plan = slot_plan(indptr, floor, rejection=rejection)
    noise = SlotNoise(
        slots.contiguous(), plan.floor, len(degrees), plan.alias, plan.share, plan.lack_bound
    )
    return indptr, noise


@needs_kernel
@pytest.mark.parametrize("below", ["alias", "rejection"])
@pytest.mark.parametrize("pool", [0, 8])
@pytest.mark.parametrize("sample", [0.0, 0.2])
def test_slot_noise_matches_the_reference(sample, pool, below):
    """Noise drawn from slots (several attempts per draw: degrees 1 to 9), the nodes below
    the floor from an alias table or by rejection, counts read from an indptr, subsampling
    from those counts; with a pool, fresh draws resolved in steps."""
    gen = torch.Generator().manual_seed(5)
    degrees = [3, 1, 4, 1, 5, 9, 2, 6, 0, 5, 3, 5]
    # nodes of degree 1-3 below the floor
    indptr, noise = slot_noise(degrees, floor=4.0, rejection=below == "rejection")
    assert noise.alias_share > 0.03
    assert (noise.alias[0].numel() > 0) == (below == "alias") == (noise.lack_bound == 0)
    walks = torch.randint(len(degrees), (8, 9), generator=gen)
    syn0 = (torch.rand(len(degrees), 16, generator=gen) - 0.5) / 16
    syn1 = torch.rand(len(degrees), 16, generator=gen) * 0.1
    threshold = sample * float(indptr[-1])
    expected = reference(walks, syn0, syn1, indptr, noise, 3, 4, 0.5, 5, 20, 11, pool=pool,
                         reuse=3 if pool else 1, threshold=threshold)  # fmt: skip
    trainer = SkipGramTrainer(
        syn0, syn1, indptr, noise, 3, 4, 0.5, FINAL_RATE, 20, 1, subsample_threshold=threshold,
        noise_pool=pool, noise_reuse=3 if pool else 1,
    )  # fmt: skip
    nonfinite, _ = trainer(walks, 5, 1, 11)
    assert nonfinite == 0
    torch.testing.assert_close(syn0.double(), expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(syn1.double(), expected[1], rtol=1e-4, atol=1e-5)


def counting_tables(num_nodes):
    """One-hot input rows and zero output rows: at a tiny rate every (context c, target t)
    update adds (label - 1/2) * alpha to syn1[t, c] and nothing measurable elsewhere."""
    return torch.eye(num_nodes), torch.zeros(num_nodes, num_nodes)


@needs_kernel
def test_window_radius_is_uniform_in_1_to_window():
    length, window, copies, lr = 30, 5, 400, 1e-6
    walks = torch.arange(length).repeat(copies, 1)
    syn0, syn1 = counting_tables(length)
    alias = NegativeSampler(torch.ones(length)).alias_table
    run(
        walks,
        syn0,
        syn1,
        torch.ones(length, dtype=torch.float64),
        alias,
        window=window,
        negatives=0,
        lr=lr,
        total=10**12,
    )
    counts = syn1.double() / (0.5 * lr)
    interior = range(window, length - window)
    by_distance = [
        sum(counts[i, i + d] + counts[i, i - d] for i in interior) for d in range(1, window + 1)
    ]
    by_distance = torch.stack(by_distance).numpy().round()
    # P(radius >= d) = (window - d + 1) / window; each position is one radius draw.
    trials = copies * len(interior)
    np.testing.assert_allclose(by_distance[0], 2 * trials, rtol=2e-3)  # d=1 always
    # Pairs at distance d, per position: 2 * 1[radius >= d]; radius = #distances covered.
    radius_hist = [(by_distance[d - 1] - by_distance[d]) / 2 for d in range(1, window)]
    radius_hist.append(by_distance[window - 1] / 2)
    chi2 = stats.chisquare(radius_hist, [sum(radius_hist) / window] * window)
    assert sum(radius_hist) == pytest.approx(trials, rel=1e-3)
    assert chi2.pvalue > 1e-3


@needs_kernel
def test_subsampling_keeps_each_node_with_its_probability():
    """The kernel computes each node's keep probability from its count (word2vec's
    formula, here from the reference's own implementation: about 0.10, 0.33, 0.69, 0.91
    and 1 for counts of 120, 15, 4.5, 3 and 0.5 times the threshold)."""
    copies, lr, threshold = 4000, 1e-6, 2.5
    counts = torch.tensor([120, 15, 4.5, 3, 0.5], dtype=torch.float64) * threshold
    keep = keep_of(counts.tolist(), threshold)
    walks = torch.tensor([[i, 4] for i in range(4)]).repeat(copies, 1)
    syn0, syn1 = counting_tables(5)
    run(
        walks,
        syn0,
        syn1,
        counts,
        NegativeSampler(torch.ones(5)).alias_table,
        window=1,
        negatives=0,
        lr=lr,
        total=10**12,
        threshold=threshold,
    )
    kept = (syn1[4, :4].double() / (0.5 * lr)).numpy()  # node 4 predicted from a kept i
    for i in range(4):
        test = stats.binomtest(round(float(kept[i])), copies, keep[i])
        assert test.pvalue > 1e-4, (i, kept[i])
    assert abs(kept[0] / copies - 0.1) < 0.03 and abs(kept[2] / copies - 0.69) < 0.04


@needs_kernel
@pytest.mark.parametrize(
    "form", ["alias", "slots", "slots above a floor", "slots above a floor, rejection below"]
)
def test_negatives_follow_degree_to_the_power_three_quarters(form):
    """From the alias table of degree ** 0.75; from slots of the degrees accepted with
    probability (1 / degree) ** 0.25; and from slots thinned above degree 5, what degrees
    1 to 4 lack drawn from an alias table, or by rejection from uniform nodes."""
    lr, copies, negatives = 1e-7, 3000, 5
    # Walk nodes 0, 1 have weight 0 (never noise); nodes 2..9 have degrees 1..8.
    degrees = torch.tensor([0.0, 0.0, 1, 2, 3, 4, 5, 6, 7, 8])
    if form == "alias":
        counts, noise = torch.ones(10, dtype=torch.float64), NegativeSampler(degrees).alias_table
    else:
        rejection = "rejection" in form
        counts, noise = slot_noise(
            degrees.long().tolist(), 5.0 if "floor" in form else None, rejection=rejection
        )
        assert (noise.lack_bound > 0) == rejection
    walks = torch.tensor([[0, 1]]).repeat(copies, 1)
    syn0, syn1 = counting_tables(10)
    run(
        walks,
        syn0,
        syn1,
        counts,
        noise,
        window=1,
        negatives=negatives,
        lr=lr,
        total=10**12,
    )
    drawn = (-syn1[2:].double().sum(dim=1) / (0.5 * lr)).numpy()
    total = 2 * copies * negatives  # two (context, node) pairs per walk
    np.testing.assert_allclose(drawn.sum(), total, rtol=1e-2)
    drawn = drawn.round()
    weights = degrees[2:].double() ** 0.75
    expected = (weights / weights.sum()).numpy() * drawn.sum()
    assert stats.chisquare(drawn, expected).pvalue > 1e-3


@needs_kernel
@pytest.mark.parametrize("hold", [4, 100])  # blocks that split the chunk; one past its end
def test_rate_is_held_for_blocks_of_walks(hold):
    """word2vec holds its rate for 10,000 tokens; the kernel holds it for ``hold_walks``
    walks of the run, counted from its start (walks 5..10 here: blocks 4-7, 8-11)."""
    gen = torch.Generator().manual_seed(4)
    walks = torch.randint(60, (6, 9), generator=gen)
    alias = NegativeSampler(torch.ones(60)).alias_table
    keep = torch.ones(60, dtype=torch.float64)
    syn0 = (torch.rand(60, 8, generator=gen) - 0.5) / 8
    syn1 = torch.rand(60, 8, generator=gen) * 0.1
    per_walk = reference(walks, syn0, syn1, keep, alias, 3, 4, 0.5, 5, 20, 11, hold=1)
    held = check_against_reference(walks, syn0, syn1, keep, alias, hold=hold)
    assert (held[0] - per_walk[0]).abs().max() > 1e-3  # the schedules differ measurably


def test_held_walks_cover_10000_tokens():
    def held(length):
        return LearningRate.of_run(0.025, 10**6, length).hold_walks

    assert held(80) == 125 and held(40) == 250
    assert held(20_000) == 1  # a walk longer than a block: every walk


@needs_kernel
def test_learning_rate_ends_at_lr_over_250():
    """gensim's last rate (0.025 down to 0.0001), not word2vec.c's lr * 1e-4."""
    walks = torch.randint(6, (4, 8), generator=torch.Generator().manual_seed(0))
    alias, keep = NegativeSampler(torch.ones(6)).alias_table, torch.ones(6, dtype=torch.float64)
    init = (torch.rand(6, 8, generator=torch.Generator().manual_seed(1)) - 0.5) / 8
    at_end = [init.clone(), torch.zeros(6, 8)]
    run(walks, *at_end, keep, alias, lr=0.5, before=100, total=100)  # past the end: floor
    flat = [init.clone(), torch.zeros(6, 8)]
    run(walks, *flat, keep, alias, lr=0.5 / 250, before=0, total=10**15)  # constant rate
    assert (at_end[1] != 0).any()
    torch.testing.assert_close(at_end[0], flat[0])
    torch.testing.assert_close(at_end[1], flat[1])


def two_communities(size=60, seed=0):
    gen = torch.Generator().manual_seed(seed)
    block = torch.arange(2 * size) // size
    same = block[:, None] == block[None, :]
    adjacency = torch.rand(2 * size, 2 * size, generator=gen) < torch.where(same, 0.15, 0.01)
    adjacency = torch.triu(adjacency, 1)
    src, dst = adjacency.nonzero().t()
    return Graph.from_edges(torch.cat([src, dst]), torch.cat([dst, src]), 2 * size), block


@needs_kernel
def test_two_threads_separate_two_communities():
    graph, block = two_communities()
    rows = train_node_embeddings(graph, dimensions=16, walk_length=20, num_walks=40, window=5,
                                 backend="compiled", workers=2, seed=1)  # fmt: skip
    assert rows.dtype == torch.float32 and rows.shape == (120, 16)
    # Centred first: word2vec's rows share a common direction that dominates raw cosines.
    unit = torch.nn.functional.normalize(rows - rows.mean(dim=0), dim=1)
    similarity = (unit @ unit.t()).numpy()
    upper = np.triu_indices(120, 1)
    same = (block[:, None] == block[None, :]).numpy()[upper]
    ranks = stats.rankdata(similarity[upper])
    auc = (ranks[same].sum() - same.sum() * (same.sum() + 1) / 2) / (same.sum() * (~same).sum())
    assert auc > 0.9


@needs_kernel
def test_one_thread_is_deterministic_and_seeds_differ():
    graph, _ = two_communities(20)
    kw = dict(dimensions=8, walk_length=10, num_walks=2, window=3, backend="compiled", workers=1)
    first = train_node_embeddings(graph, seed=4, **kw)
    assert torch.equal(first, train_node_embeddings(graph, seed=4, **kw))
    assert not torch.equal(first, train_node_embeddings(graph, seed=5, **kw))


@needs_kernel
def test_divergence_raises_and_names_the_chunk_and_rate():
    graph, _ = two_communities(20)
    with pytest.raises(TrainingDiverged, match=r"walk chunk \d+ of 10: .*lower lr") as error:
        train_node_embeddings(
            graph, dimensions=8, walk_length=20, num_walks=10, lr=1e3, backend="compiled"
        )
    assert "1000" in str(error.value) or "1e+03" in str(error.value)
    assert isinstance(error.value, ValueError)


@needs_kernel
def test_unknown_vector_width_is_refused():
    walks = torch.zeros(1, 3, dtype=torch.long)
    syn0, syn1 = torch.ones(2, 4), torch.zeros(2, 4)
    alias = NegativeSampler(torch.ones(2)).alias_table
    with pytest.raises(ValueError, match="vector_width must be 0 .the widest., 4 or 8, got 5"):
        run(walks, syn0, syn1, torch.ones(2, dtype=torch.float64), alias, vector_width=5)
    assert (syn0 == 1).all() and (syn1 == 0).all()


@needs_kernel
@pytest.mark.parametrize("final_rate", [0.0, -0.1, 1.5, float("nan")])
def test_a_final_rate_outside_zero_one_is_refused(final_rate):
    walks = torch.zeros(1, 3, dtype=torch.long)
    syn0, syn1 = torch.ones(2, 4), torch.zeros(2, 4)
    alias = NegativeSampler(torch.ones(2)).alias_table
    keep = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="final_rate must be in \\(0, 1\\], got"):
        SkipGramTrainer(syn0, syn1, keep, alias, 2, 3, 0.025, final_rate, 1, 1)(walks, 0, 1, 7)
    assert (syn0 == 1).all() and (syn1 == 0).all()


@needs_kernel
def test_bad_ids_raise_before_any_write():
    syn0, syn1 = torch.ones(4, 3), torch.ones(4, 3)
    alias = NegativeSampler(torch.ones(4)).alias_table
    with pytest.raises(IndexError, match=r"walks holds ids in \[0, 4\]"):
        run(torch.tensor([[0, 4]]), syn0, syn1, torch.ones(4, dtype=torch.float64), alias)
    assert torch.equal(syn0, torch.ones(4, 3)) and torch.equal(syn1, torch.ones(4, 3))


def test_slot_noise_refuses_what_the_kernel_could_not_read():
    none = (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.float64)) * 2
    alias = (torch.tensor([1]), torch.tensor([0.5], dtype=torch.float64), torch.tensor([2]))
    with pytest.raises(IndexError, match=r"noise slots hold ids in \[0, 4\], outside \[0, 4\)"):
        SlotNoise(torch.tensor([0, 4, 1]), 1.0, 4, none[:3], 0.0)
    with pytest.raises(ValueError, match="noise slots must not be empty"):
        SlotNoise(torch.zeros(0, dtype=torch.long), 1.0, 4, none[:3], 0.0)
    with pytest.raises(ValueError, match="noise floor must be > 0, got 0.0"):
        SlotNoise(torch.tensor([0, 1]), 0.0, 4, none[:3], 0.0)
    with pytest.raises(TypeError, match="noise slots must be int64, got float32"):
        SlotNoise(torch.tensor([0.0, 1.0]), 1.0, 4, none[:3], 0.0)
    with pytest.raises(ValueError, match="neither an alias table nor a lack bound; got 0.2 with 0"):
        SlotNoise(torch.tensor([0, 1]), 1.0, 4, none[:3], 0.2)
    with pytest.raises(ValueError, match="in \\[0, 1\\).* got 1.0 with 1 columns"):
        SlotNoise(torch.tensor([0, 1]), 1.0, 4, alias, 1.0)
    with pytest.raises(ValueError, match="lack bound .* and 0 with an alias table; got 0.5 with 1"):
        SlotNoise(torch.tensor([0, 1]), 2.0, 4, alias, 0.1, 0.5)
    with pytest.raises(ValueError, match="lack bound must be a finite number >= 0.* got nan"):
        SlotNoise(torch.tensor([0, 1]), 2.0, 4, none[:3], 0.1, math.nan)
    with pytest.raises(ValueError, match="neither an alias table nor a lack bound; got 0.0 with"):
        SlotNoise(torch.tensor([0, 1]), 2.0, 4, none[:3], 0.0, 0.5)


@needs_kernel
def test_slot_noise_needs_counts_as_an_indptr():
    syn0, syn1 = torch.ones(4, 3), torch.ones(4, 3)
    _, noise = slot_noise([1, 1, 1, 1])
    with pytest.raises(ValueError, match="noise slots need the counts as an int64 indptr"):
        run(torch.tensor([[0, 1]]), syn0, syn1, torch.ones(4, dtype=torch.float64), noise)
    with pytest.raises(ValueError, match=r"counts as an int64 indptr must have 5 entries .* got 4"):
        run(torch.tensor([[0, 1]]), syn0, syn1, torch.arange(4), noise)
    assert torch.equal(syn0, torch.ones(4, 3)) and torch.equal(syn1, torch.ones(4, 3))


def test_chunk_seeds_are_distinct():
    seeds = {chunk_seed(s, c) for s in range(3) for c in range(1000)}
    assert len(seeds) == 3000


def test_an_unknown_backend_is_refused():
    graph, _ = two_communities(5)
    with pytest.raises(ValueError, match="backend must be one of"):
        train_node_embeddings(graph, backend="fast")


@pytest.mark.parametrize("bad_row", [0, 2_047, 2_048, 16_384, 39_999])
def test_the_finite_check_names_the_first_bad_row_in_any_block(bad_row):
    """The table is checked a block of rows at a time (no table-sized temporaries): the
    row named is the table's own index, in the first block as in later ones."""
    rows = torch.zeros(40_000, 4)
    check_rows(rows, 0.025, "here")  # all finite: no error
    rows[bad_row, 2] = float("nan")
    rows[-1, 0] = float("inf")  # a later bad row is not the one named
    with pytest.raises(TrainingDiverged, match=rf"embedding row {bad_row} is not finite"):
        check_rows(rows, 0.025, "here")


@pytest.mark.parametrize("backend", ["compiled", "torch"])
def test_the_backend_is_freed_before_the_final_check_reads_the_rows(backend, monkeypatch):
    """The last check reads the input rows alone: the backend (its output rows, its noise)
    is gone by then, so that the check's temporaries never sit beside both tables."""
    if backend == "compiled" and kernel is None:
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    import weakref

    from graphemb.skipgram import run

    made, alive_at_check = [], []
    create_backend = run.create_backend

    def recording_create(*args, **kwargs):
        trainer = create_backend(*args, **kwargs)
        made.append(weakref.ref(trainer))
        return trainer

    def recording_check(rows, lr, where):
        alive_at_check.append(made[0]() is not None)
        check_rows(rows, lr, where)

    monkeypatch.setattr(run, "create_backend", recording_create)
    monkeypatch.setattr(run, "check_rows", recording_check)
    graph, _ = two_communities(20)
    rows = train_node_embeddings(graph, dimensions=8, walk_length=5, num_walks=1, backend=backend)
    assert rows.shape == (graph.num_nodes, 8) and bool(torch.isfinite(rows).all())
    assert alive_at_check == [False]
