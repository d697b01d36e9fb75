"""The compiled kernels' library itself (``graphemb._native``): it loads without torch in it,
speaks the bindings' interface, follows torch's thread count, survives fork() and calls
from several Python threads, and reports a failed allocation as the caller's own error.

Under ``make test-wheel`` (GRAPHEMB_EXPECT_INSTALL set) the package must come from the
unpacked wheel, not from the checkout: one build, tested on both stacks."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy
import pytest
import torch

from graphemb import _native
from graphemb._compiled import compiled_module, disabled
from graphemb._native.library import ABI_VERSION, library

pytestmark = pytest.mark.skipif(
    compiled_module() is None or disabled(), reason="the compiled kernels are disabled here"
)

# The hash of csrc/nn/dropout.cpp written out in Python: the oracle of the calls below.
_MASK32 = 0xFFFFFFFF


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _MASK32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def _expected_dropout(x: torch.Tensor, threshold: int, scale: float, key: int) -> torch.Tensor:
    i = torch.arange(x.numel(), dtype=torch.int64)
    low, high = key & _MASK32, (key >> 32) + (i >> 32)
    word = _fmix32(_fmix32((((i & _MASK32) * 0x9E3779B9) + low) & _MASK32) ^ (high & _MASK32))
    return torch.where(word >= threshold, x * scale, torch.zeros_like(x))


def _dropout(x: torch.Tensor, key: int) -> torch.Tensor:
    return compiled_module().dropout_masked_scale(x, 1 << 31, 2.0, key)


def test_library_speaks_the_bindings_interface():
    lib = library()
    assert lib.abi_version == ABI_VERSION
    assert lib.simd_level in {"avx512f", "avx2+fma", "sse2", "neon", "scalar"}
    assert _native.load_error() == ""
    assert lib.path == _native.library_path()


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
def test_library_links_neither_torch_nor_python():
    """One build serves every torch: the library needs only the C and C++ runtimes."""
    linked = subprocess.run(["ldd", str(library().path)], capture_output=True, text=True).stdout
    assert linked.strip()
    assert "torch" not in linked and "libpython" not in linked and "gomp" not in linked, linked


def test_wheel_under_test_is_the_one_imported():
    expected = os.environ.get("GRAPHEMB_EXPECT_INSTALL")
    if expected is None:
        pytest.skip("only under `make test-wheel`")
    assert Path(_native.__file__).resolve().is_relative_to(Path(expected).resolve())
    assert library().path.resolve().is_relative_to(Path(expected).resolve())


def test_kernels_follow_torchs_thread_count():
    x = torch.randn(1 << 20)
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            torch.testing.assert_close(_dropout(x, 7), _expected_dropout(x, 1 << 31, 2.0, 7))
            assert library().num_threads == count
    finally:
        torch.set_num_threads(threads)


def _dropout_in_child(queue: multiprocessing.Queue) -> None:
    # numpy, not torch, makes the input: torch's own OpenMP threads do not survive fork()
    # either (a parallel torch op here would hang in libgomp, with or without graphemb)
    x = torch.from_numpy(numpy.arange(1 << 20, dtype=numpy.float32))
    queue.put(_dropout(x, 11).numpy())


def test_a_forked_child_runs_parallel_kernels():
    """The pool's threads do not survive fork(): the child starts a pool of its own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.arange(1 << 20, dtype=torch.float32)
        parent = _dropout(x, 11)  # the parent's pool is running
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_dropout_in_child, args=(queue,))
        child.start()
        got = torch.from_numpy(queue.get(timeout=60))
        child.join(timeout=60)
        assert child.exitcode == 0
        torch.testing.assert_close(got, parent)
        torch.testing.assert_close(parent, _expected_dropout(x, 1 << 31, 2.0, 11))
    finally:
        torch.set_num_threads(threads)


def test_calls_from_several_python_threads_at_once():
    """A call that finds the pool busy with another thread's call runs on its own thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    inputs = [torch.randn(1 << 19) for _ in range(6)]
    results: dict[int, torch.Tensor] = {}

    def work(position: int) -> None:
        for _ in range(5):
            results[position] = _dropout(inputs[position], position)

    try:
        workers = [threading.Thread(target=work, args=(p,)) for p in range(len(inputs))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert not any(worker.is_alive() for worker in workers)
    finally:
        torch.set_num_threads(threads)
    for position, x in enumerate(inputs):
        torch.testing.assert_close(results[position], _expected_dropout(x, 1 << 31, 2.0, position))


def test_a_failed_allocation_raises_the_callers_error_and_writes_nothing():
    class Refused(Exception):
        pass

    def allocate(count: int):
        raise Refused(f"no memory for {count} edges")

    src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    before = (src.clone(), dst.clone())
    with pytest.raises(Refused, match="no memory for 3 edges"):
        compiled_module().csc_from_edges(src, dst, 3, False, allocate)
    assert torch.equal(src, before[0]) and torch.equal(dst, before[1])
