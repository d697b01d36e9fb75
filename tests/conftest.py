import os
import sys

import pytest
import torch

sys.path.insert(
    0, os.path.dirname(__file__)
)  # helpers (_multiprocess, oracles) for spawned ranks too

from helpers import CUDA  # noqa: E402

from graphemb.optim import kernels  # noqa: E402

CPU_KERNELS = pytest.param(
    "cpu",
    id="cpu-kernels",
    marks=pytest.mark.skipif(
        not kernels.available(), reason="graphemb_kernels is not built for this environment"
    ),
)
CPU_TORCH = pytest.param("cpu-torch", id="cpu-torch")


@pytest.fixture
def one_thread():
    """Small tensors: one thread is faster, and never spins against other busy processes
    (measured 4x slower steps with 2 threads on a loaded 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=[CPU_KERNELS, CPU_TORCH, CUDA])
def device(request, monkeypatch):
    """Every single-process test runs on CPU -- with the fused kernels and with the
    pure-torch path -- and on CUDA where a GPU exists."""
    if request.param == "cpu-torch":
        monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
        return torch.device("cpu")
    return torch.device(request.param)


def pytest_sessionstart(session):
    """In CI the Planetoid files must be there: tests that need them would otherwise skip,
    and a skipped test proves nothing."""
    if os.environ.get("CI"):
        folder = os.environ.get("GRAPHEMB_PLANETOID_DIR", "")
        if not os.path.exists(os.path.join(folder, "ind.cora.graph")):
            raise pytest.UsageError(
                f"CI: GRAPHEMB_PLANETOID_DIR={folder!r} holds no Planetoid files (.ci/run sets "
                "it to ../shared/datasets/planetoid)"
            )
