"""Large CPU results written into recycled memory (``graphemb/distributed/recycling.py``):
a block is handed out again only when nothing holds it -- not the caller, a view, a numpy
array or autograd -- and the lookups and aggregation gradients that use it give the values
of fresh tensors (oracles: indexing the table, a float64 dense transpose, torch's SGD on a
sparse ``nn.Embedding``)."""

from __future__ import annotations

import pytest
import torch

from graphemb import NodeEmbedding
from graphemb.distributed.recycling import RecycledBlocks, _sole_owner_users
from graphemb.optim import SparseSGD

CPU = torch.device("cpu")
BIG = (20_000, 64)  # 5 MiB of float32: recycled (4 MiB and more)

pytestmark = pytest.mark.skipif(
    _sole_owner_users() is None, reason="this torch does not count a storage's users"
)


def test_a_block_is_handed_out_again_only_once_nothing_holds_it():
    blocks = RecycledBlocks(blocks=1)
    first = blocks.empty(BIG, torch.float32, CPU)
    address = first.data_ptr()
    second = blocks.empty(BIG, torch.float32, CPU)
    assert second.data_ptr() != address  # first is still held
    del first, second
    third = blocks.empty(BIG, torch.float32, CPU)
    assert third.data_ptr() == address and third.shape == BIG and third.is_contiguous()

    for holder in (
        lambda t: t[5:],  # a view
        lambda t: t.numpy(),  # a numpy array over its memory
        lambda t: (t.requires_grad_() * 2).sum(),  # autograd saves it for backward
    ):
        held = holder(third)
        del third
        other = blocks.empty(BIG, torch.float32, CPU)
        assert other.data_ptr() != address
        del held, other
        third = blocks.empty(BIG, torch.float32, CPU)
        assert third.data_ptr() == address


def test_small_huge_other_dtype_and_smaller_blocks_are_fresh_memory():
    blocks = RecycledBlocks(blocks=2, keep_at_most=64 << 20)
    blocks.empty((10, 64), torch.float32, CPU)  # 2.5 KiB: the allocator's business
    assert not blocks._blocks
    blocks.empty((300_000, 64), torch.float32, CPU)  # 73 MiB: above keep_at_most
    assert not blocks._blocks
    doubles = blocks.empty(BIG, torch.float64, CPU)
    address = doubles.data_ptr()
    del doubles
    assert blocks.empty(BIG, torch.float32, CPU).data_ptr() != address  # another dtype
    assert blocks.empty(BIG, torch.float64, CPU).data_ptr() == address
    wider = blocks.empty((40_000, 64), torch.float64, CPU)  # does not fit the kept block
    assert wider.data_ptr() != address


def test_lookups_held_across_batches_keep_their_rows():
    generator = torch.Generator().manual_seed(0)
    emb = NodeEmbedding(50_000, 64, name="held", init_func=lambda t: t.normal_(generator=generator))
    table = emb.all_get_embedding()
    ids = [torch.randint(0, 50_000, (30_000,), generator=generator) for _ in range(4)]
    with torch.no_grad():
        kept = [emb(ids[0]), emb(ids[1])]
        torch.testing.assert_close(kept[0], table[ids[0]], rtol=0, atol=0)
        del kept[0]  # its block is free again: the next lookup writes over it
        kept.append(emb(ids[2]))
        kept.append(emb(ids[3]))
    for rows, wanted in zip(kept, ids[1:], strict=True):
        torch.testing.assert_close(rows, table[wanted], rtol=0, atol=0)


def test_training_on_recycled_lookups_equals_torch_sgd():
    generator = torch.Generator().manual_seed(1)
    initial = torch.randn(40_000, 64, generator=generator)
    emb = NodeEmbedding(40_000, 64, name="adam", init_func=lambda t: t.copy_(initial))
    optimizer = SparseSGD([emb], lr=0.5)
    oracle = torch.nn.Embedding.from_pretrained(initial.clone(), freeze=False, sparse=True)
    oracle_optimizer = torch.optim.SGD(oracle.parameters(), lr=0.5)
    weights = torch.randn(64, generator=generator)
    addresses = set()
    for _ in range(4):
        ids = torch.randint(0, 40_000, (25_000,), generator=generator)  # 6 MiB of rows
        rows = emb(ids)
        addresses.add(rows.data_ptr())
        (rows @ weights).square().mean().backward()
        del rows
        optimizer.step()
        oracle_optimizer.zero_grad()
        (oracle(ids) @ weights).square().mean().backward()
        oracle_optimizer.step()
    torch.testing.assert_close(
        emb.all_get_embedding(), oracle.weight.detach(), rtol=1e-5, atol=1e-6
    )


def test_recycled_aggregation_gradients_equal_the_dense_transpose():
    pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")
    from graphemb._compiled import compiled_module, disabled
    from graphemb.nn.aggregation import aggregate_neighbors
    from graphemb.sampling import Block

    if compiled_module() is None or disabled():
        pytest.skip("the compiled kernels are disabled here")
    generator = torch.Generator().manual_seed(2)
    S, D, E, F = 20_000, 2_000, 60_000, 64
    dst = torch.randint(0, D, (E,), generator=generator).sort().values
    block = Block(
        torch.arange(S), D, torch.stack([torch.randint(0, S, (E,), generator=generator), dst])
    )
    matrix = torch.zeros(D, S, dtype=torch.float64)
    matrix.index_put_((dst, block.edge_index[0]), torch.ones(E, dtype=torch.float64), True)
    matrix = matrix / matrix.sum(1, keepdim=True).clamp(min=1)
    grads, addresses = [], []
    for _ in range(3):  # the first gradient is kept, the second dropped before the third
        h = torch.randn(S, F, generator=generator, requires_grad=True)
        g = torch.randn(D, F, generator=generator)
        aggregated, _ = aggregate_neighbors(block, h, "mean")
        (aggregated * g).sum().backward()
        grads.append((h.grad, matrix.t() @ g.double()))
        addresses.append(h.grad.data_ptr())
        if len(grads) == 2:
            del grads[1]
            h = None
    for grad, wanted in grads:
        torch.testing.assert_close(grad.double(), wanted, rtol=1e-5, atol=1e-6)
    assert addresses[2] == addresses[1] != addresses[0]  # the dropped gradient's block
