import importlib.metadata
import os
import sys

import pytest
import torch


def _triton_major() -> int:
    try:
        return int(importlib.metadata.version("triton").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


# Triton's interpreter (TRITON_INTERPRET=1) is chosen per process when Triton is imported, and
# importing torch_geometric imports Triton: set here, before any test module is imported, so
# that test_triton_update.py runs its interpreter tests in this process rather than in a child
# pytest process. Not on a GPU machine (its tests need the compiled kernel), nor with a Triton
# older than 3.0 (the dgl stack's, which graphemb does not use).
if (
    "triton" not in sys.modules
    and "TRITON_INTERPRET" not in os.environ
    and _triton_major() >= 3
    and not torch.cuda.is_available()
):
    os.environ["TRITON_INTERPRET"] = "1"

sys.path.insert(
    0, os.path.dirname(__file__)
)  # helpers (_multiprocess, oracles) for spawned ranks too

from helpers import CUDA, EVERY_STACK_VARIABLE, STACK  # noqa: E402

from graphemb._compiled import compiled_module, disabled, load_module  # noqa: E402
from graphemb.optim import kernels  # noqa: E402


def pytest_configure(config):
    """The compiled kernels are part of every install: a test environment without them is
    broken, not a reason to skip their tests (set GRAPHEMB_DISABLE_KERNELS=1 to test the
    pure-torch paths on purpose)."""
    if compiled_module() is None and not disabled():
        raise pytest.UsageError(
            f"the compiled kernels did not load: {load_module()[1]}; rebuild them with "
            "`make kernels`, or set GRAPHEMB_DISABLE_KERNELS=1 to test without them"
        )


CPU_KERNELS = pytest.param(
    "cpu",
    id="cpu-kernels",
    marks=pytest.mark.skipif(
        not kernels.available(),
        reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
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


@pytest.fixture
def skipgram_kernel_calls(monkeypatch):
    """The arguments, by name, of every call the skip-gram trainer makes to the compiled
    kernel (which still trains), in order: what its prepared trainer was built with, and
    the chunk's own."""
    import inspect

    import graphemb.skipgram.backends as backends
    from graphemb._native.skipgram import SkipGramTrainer

    calls = []
    signature = inspect.signature(SkipGramTrainer)

    class Recording(SkipGramTrainer):
        def __init__(self, *args, **kwargs):
            self.prepared_with = dict(signature.bind(*args, **kwargs).arguments)
            super().__init__(*args, **kwargs)

        def __call__(self, walks, walks_before, threads, seed):
            chunk = {"walks": walks, "walks_before": walks_before, "threads": threads,
                     "seed": seed}  # fmt: skip
            calls.append({**self.prepared_with, **chunk})
            return super().__call__(walks, walks_before, threads, seed)

    monkeypatch.setattr(backends, "compiled_kernel", lambda: Recording)
    return calls


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


def pytest_collection_modifyitems(config, items):
    """``one_stack(name, why)``: heavy end-to-end runs (examples, notebooks, benchmark quick
    modes) whose code is the same on both stacks run on one of them -- `make test` runs the
    suite on both -- and are skipped on the other with ``why``, which says where and why they
    run. GRAPHEMB_TEST_EVERY_STACK=1 runs them on every stack."""
    every_stack = os.environ.get(EVERY_STACK_VARIABLE) == "1"
    for item in items:
        mark = item.get_closest_marker("one_stack")
        if mark is None:
            continue
        name, why = mark.args
        if name not in ("dgl", "modern"):
            raise pytest.UsageError(f"{item.nodeid}: one_stack({name!r}): 'dgl' or 'modern'")
        if name != STACK and not every_stack:
            item.add_marker(pytest.mark.skip(reason=f"runs on the {name} stack only: {why}"))
