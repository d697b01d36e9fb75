"""Cases the sparse-optimizer tests share (tests/unit/test_optim*.py): a small table, batches
with many duplicate ids and a regression target, and the same training run on graphemb, on
torch's own optimizers and on the float64 reference."""

from __future__ import annotations

import torch
from oracles import DenseLazyReference

from graphemb import NodeEmbedding

NUM, DIM, STEPS = 50, 8, 30
F32 = {"rtol": 1e-5, "atol": 1e-6}
F64 = {"rtol": 1e-4, "atol": 1e-5}


def batches(steps=STEPS, batch=40, seed=0, cover_all=False):
    """Ids with many duplicates (40 draws out of 50 rows) and a regression target."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, NUM, (batch,), generator=gen)
        if cover_all:
            ids = torch.cat([torch.randperm(NUM, generator=gen), ids])
        yield ids, torch.randn(ids.numel(), DIM, generator=gen)


def loss_of(rows, target):
    return ((rows - target) ** 2).sum() / target.shape[0]


def initial_table(seed=1):
    return torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(seed))


def train_graphemb(make_opt, device, dtype=torch.float32, **batch_kwargs):
    emb = NodeEmbedding(
        NUM, DIM, "table", device=device, dtype=dtype, init_func=lambda t: t.copy_(initial_table())
    )
    opt = make_opt([emb])
    for ids, target in batches(**batch_kwargs):
        ids, target = ids.to(device), target.to(device)
        rows = emb(ids.view(2, -1))  # a 2-D id tensor: output (2, B/2, DIM)
        loss_of(rows.reshape(-1, DIM).float(), target).backward()
        opt.step()
    return emb, opt


def train_torch(make_opt, device, sparse, **batch_kwargs):
    ref = torch.nn.Embedding(NUM, DIM, sparse=sparse).to(device)
    with torch.no_grad():
        ref.weight.copy_(initial_table())
    opt = make_opt(ref.parameters())
    for ids, target in batches(**batch_kwargs):
        opt.zero_grad()
        loss_of(ref(ids.to(device)), target.to(device)).backward()
        opt.step()
    return ref, opt


def train_reference(rule, lr, **kwargs):
    batch_kwargs = {k: kwargs.pop(k) for k in ("cover_all",) if k in kwargs}
    ref = DenseLazyReference(initial_table(), rule, lr, **kwargs)
    for ids, target in batches(**batch_kwargs):
        w = ref.weight.clone().requires_grad_()
        loss_of(w[ids], target.double()).backward()
        ref.apply(ids, w.grad)
    return ref
