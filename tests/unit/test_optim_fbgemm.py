"""Sparse Adagrad and row-wise Adagrad against FBGEMM's fused CPU steps, an independent
implementation of the same formulas (the dgl stack installs FBGEMM's CPU build for torch
2.2; no build loads with the modern stack's torch).

FBGEMM's ``SplitTableBatchedEmbeddingBagsCodegen`` with bags of one id each is a lookup;
its backward sums each row's gradients and applies ``EXACT_ADAGRAD`` or
``EXACT_ROWWISE_ADAGRAD`` in place. Both tables train 30 steps on the same batches (many
duplicate ids, rows left out of some steps) from the same start; weights and state must
agree to float32 rounding (rtol 1e-5 / atol 1e-6).
"""

from __future__ import annotations

import pytest
import torch
from optim_cases import DIM, F32, NUM, batches, initial_table, loss_of, train_graphemb

from graphemb.optim import SparseAdagrad, SparseRowWiseAdagrad

training = pytest.importorskip(
    "fbgemm_gpu.split_table_batched_embeddings_ops_training",
    reason="FBGEMM's CPU build is installed on the dgl stack only (make test-dgl)",
)
common = pytest.importorskip("fbgemm_gpu.split_table_batched_embeddings_ops_common")
configs = pytest.importorskip("fbgemm_gpu.split_embedding_configs")

LR, EPS = 0.2, 1e-8


def train_fbgemm(optimizer: str) -> tuple[torch.Tensor, torch.Tensor]:
    """FBGEMM's table after the shared batches: ``(weight (NUM, DIM), state)``."""
    table = training.SplitTableBatchedEmbeddingBagsCodegen(
        [(NUM, DIM, common.EmbeddingLocation.HOST, training.ComputeDevice.CPU)],
        optimizer=getattr(configs.EmbOptimType, optimizer),
        learning_rate=LR,
        eps=EPS,
        pooling_mode=common.PoolingMode.SUM,
        weights_precision=configs.SparseType.FP32,
    )
    weight = table.split_embedding_weights()[0]
    with torch.no_grad():
        weight.copy_(initial_table())
    for ids, target in batches():
        loss_of(table(ids, torch.arange(ids.numel() + 1)), target).backward()
    (state,) = table.split_optimizer_states()[0]
    return weight.detach(), state


@pytest.mark.parametrize(
    "make_opt, fbgemm_optimizer",
    [
        pytest.param(lambda p: SparseAdagrad(p, lr=LR, eps=EPS), "EXACT_ADAGRAD", id="adagrad"),
        pytest.param(
            lambda p: SparseRowWiseAdagrad(p, lr=LR, eps=EPS),
            "EXACT_ROWWISE_ADAGRAD",
            id="rowwise_adagrad",
        ),
    ],
)
def test_adagrad_steps_equal_fbgemm(device, make_opt, fbgemm_optimizer):
    emb, opt = train_graphemb(make_opt, device)
    weight, state = train_fbgemm(fbgemm_optimizer)
    assert not torch.equal(weight, initial_table()), "FBGEMM's step left the table as it was"
    torch.testing.assert_close(emb.weight.cpu(), weight, **F32)
    torch.testing.assert_close(opt.state[emb]["sum"].cpu().reshape(state.shape), state, **F32)
