"""word2vec's SGD step (SkipGram.sgd_step, graphemb.skipgram.step) against a float64 reference
that visits the pairs one by one as word2vec does, for every layout of negatives
(graphemb.skipgram.sharing), one defined outside the package included; the rules for rows
repeated in a batch; bfloat16 products."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from skipgram_batches import DIM, NUM, WINDOW, K, initial_tables, tiny_walks, walk_centers

from graphemb.graph import Graph
from graphemb.sampling.walks import PAD
from graphemb.skipgram import SkipGram, train_node_embeddings
from graphemb.skipgram.sharing import BlockNegatives

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


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
    for w, t, c in walk_centers(walks):
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


class MirroredNegatives(BlockNegatives):
    """A layout the package does not know: block ``b`` serves every center of walk
    ``W - 1 - b``."""

    name = "mirrored"

    def block_order(self, num_walks, length, device):
        walk = torch.arange(num_walks - 1, -1, -1, device=device)
        return walk[:, None] * length + torch.arange(length, device=device)


def test_a_layout_defined_outside_the_package_plugs_into_the_loss_and_the_step():
    # Its oracle: the float64 reference of "walk" with the blocks in reverse order.
    walks, radii, negatives = word2vec_batch("walk")
    expected, center, context, center_grad, context_grad, _ = float64_reference_and_model(
        walks, radii, negatives.flip(0), "walk", "w2v-mirrored-reference"
    )
    model = SkipGram(
        NUM,
        DIM,
        window=WINDOW,
        name="w2v-mirrored",
        dtype=torch.float64,
        sharing=MirroredNegatives(),
        num_negatives=K,
    )
    assert model.sharing == "mirrored" and model.fused_step
    assert model.negatives_shape(walks.shape, 7) == (walks.shape[0], 7)
    model.center.all_set_embedding(center)
    model.context.all_set_embedding(context)
    loss = model(walks, negatives, radii=radii, reduction="sum")
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    summed = model.sgd_step(walks, negatives, lr=0.1, radii=radii)
    assert summed == pytest.approx(expected.item(), rel=1e-12)
    torch.testing.assert_close(
        model.center.all_get_embedding(), center - 0.1 * center_grad, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        model.context.all_get_embedding(), context - 0.1 * context_grad, rtol=0, atol=1e-12
    )
