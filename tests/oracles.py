"""Independent references for the optimizer tests, written from the published formulas
in float64 over dense tables (no code shared with graphemb)."""

from __future__ import annotations

import torch


class DenseLazyReference:
    """Sparse optimizers re-derived in float64: a row is updated iff it was looked up.

    ``rule`` is one of "sgd", "adagrad", "rowwise_adagrad", "adam".
    """

    def __init__(
        self, weight: torch.Tensor, rule: str, lr: float, eps: float = 0.0, betas=(0.9, 0.999)
    ):
        self.weight = weight.detach().to(torch.float64).clone()
        self.rule, self.lr, self.eps = rule, lr, eps
        self.beta1, self.beta2 = betas
        n, d = self.weight.shape
        self.sum = torch.zeros(n, d, dtype=torch.float64)
        self.row_sum = torch.zeros(n, dtype=torch.float64)
        self.exp_avg = torch.zeros(n, d, dtype=torch.float64)
        self.exp_avg_sq = torch.zeros(n, d, dtype=torch.float64)
        self.step = torch.zeros(n, dtype=torch.int64)

    def apply(self, ids: torch.Tensor, dense_grad: torch.Tensor) -> None:
        """``dense_grad``: gradient of the loss w.r.t. the whole table (duplicates summed)."""
        rows = torch.unique(ids.reshape(-1))
        g = dense_grad.to(torch.float64)[rows]
        w = self.weight
        if self.rule == "sgd":
            w[rows] -= self.lr * g
        elif self.rule == "adagrad":
            self.sum[rows] += g * g
            w[rows] -= self.lr * g / (self.sum[rows].sqrt() + self.eps)
        elif self.rule == "rowwise_adagrad":
            self.row_sum[rows] += (g * g).mean(dim=1)
            w[rows] -= self.lr * g / (self.row_sum[rows].sqrt() + self.eps)[:, None]
        elif self.rule == "adam":
            self.step[rows] += 1
            t = self.step[rows].to(torch.float64)[:, None]
            m = self.exp_avg[rows] = self.beta1 * self.exp_avg[rows] + (1 - self.beta1) * g
            v = self.exp_avg_sq[rows] = (
                self.beta2 * self.exp_avg_sq[rows] + (1 - self.beta2) * g * g
            )
            m_hat = m / (1 - self.beta1**t)
            v_hat = v / (1 - self.beta2**t)
            w[rows] -= self.lr * m_hat / (v_hat.sqrt() + self.eps)
        else:
            raise ValueError(self.rule)
