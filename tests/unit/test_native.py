"""The compiled kernels' library itself (``graphemb._native``): it loads without torch in it,
speaks the bindings' interface, follows torch's thread count, runs its parallel loops on
torch's OpenMP threads where torch brought them (or its own), survives fork() and calls
from several Python threads, reports a failed allocation as the caller's own error, and
leaves no reference cycle holding what a call allocated.

Under ``make test-wheel`` (GRAPHEMB_EXPECT_INSTALL set) the package must come from the
unpacked wheel, not from the checkout: one build, tested on both stacks."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import shutil
import subprocess
import sys
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
    """Element ``i`` takes half ``(i >> 3) & 1`` of word ``(i >> 4) * 8 + (i & 7)``: 16
    elements to a block of 8 words."""
    i = torch.arange(x.numel(), dtype=torch.int64)
    word_index = ((i >> 4) << 3) | (i & 7)
    low, high = key & _MASK32, (key >> 32) + (word_index >> 32)
    offset = _fmix32(high & _MASK32)
    word = _fmix32(((((word_index & _MASK32) ^ low) * 0x9E3779B9) + offset) & _MASK32)
    half = torch.where((i & 8) != 0, word >> 16, word & 0xFFFF)
    return torch.where(half >= threshold, x * scale, torch.zeros_like(x))


def _dropout(x: torch.Tensor, key: int) -> torch.Tensor:
    return compiled_module().dropout_masked_scale(x, 1 << 15, 2.0, key)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1_000_003])
@pytest.mark.parametrize("threshold", [0, 1, 1 << 15, (1 << 16) - 1])
def test_dropout_is_its_hash_at_any_length(n, threshold):
    """Whole blocks of 16 and the elements after them (one by one) give the oracle's mask."""
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    out = compiled_module().dropout_masked_scale(x, threshold, 3.0, -5)
    assert torch.equal(out, _expected_dropout(x, threshold, 3.0, -5))


def test_dropout_threshold_outside_sixteen_bits_is_refused():
    """By the bindings, and by the C interface itself (whose block and element paths would
    read such a threshold differently)."""
    x, out = torch.ones(4), torch.full((4,), 7.0)
    with pytest.raises(ValueError, match=r"threshold = 65536 is not in \[0, 2\^16\)"):
        compiled_module().dropout_masked_scale(x, 1 << 16, 2.0, 0)
    with pytest.raises(ValueError, match=r"threshold = 2147483648 is not in \[0, 2\^16\)"):
        library().call(
            "ge_dropout_masked_scale", x.data_ptr(), out.data_ptr(), 4, 0, 1 << 31, 2.0, 0
        )
    assert torch.equal(out, torch.full((4,), 7.0))


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
            torch.testing.assert_close(_dropout(x, 7), _expected_dropout(x, 1 << 15, 2.0, 7))
            assert library().num_threads == count
    finally:
        torch.set_num_threads(threads)


def _openmp_in_process() -> bool:
    """Whether an OpenMP runtime (torch's) exports GNU's entry point to the process."""
    return hasattr(ctypes.CDLL(None), "GOMP_parallel")


# Walks from a seed do not depend on the threads that draw them (every walker has a stream
# of its own): the walks of one thread are the oracle of every way of running them.
_WALKS = """
import sys, torch
from graphemb.graph import Graph
from graphemb.sampling import RandomWalker
generator = torch.Generator().manual_seed(0)
src = torch.randint(0, 500, (4000,), generator=generator)
dst = torch.randint(0, 500, (4000,), generator=generator)
walker = RandomWalker(Graph.from_edges(src, dst, 500), 0.5, 2.0)
def walks():
    return walker(torch.arange(500).repeat(10), 12, generator=torch.Generator().manual_seed(3))
"""


@pytest.mark.skipif(not _openmp_in_process(), reason="torch brought no OpenMP runtime here")
def test_parallel_loops_run_on_torchs_openmp_threads_or_the_librarys_own():
    """Both give the walks of one thread; the library's own threads on request."""
    namespace: dict = {}
    exec(_WALKS, namespace)
    lib, threads = library(), torch.get_num_threads()
    assert lib.uses_openmp
    try:
        torch.set_num_threads(1)
        one_thread = namespace["walks"]()
        torch.set_num_threads(2)
        on_openmp = namespace["walks"]()
        assert lib.allow_openmp(False) is True and not lib.uses_openmp
        on_own_threads = namespace["walks"]()
    finally:
        lib.allow_openmp(True)
        torch.set_num_threads(threads)
    assert lib.uses_openmp
    assert torch.equal(on_openmp, one_thread) and torch.equal(on_own_threads, one_thread)


def test_info_says_whose_threads_the_kernels_run_on():
    from graphemb.about import about

    lib = library()
    expected = "torch's OpenMP threads" if _openmp_in_process() else "threads of their own"
    assert expected in about()["threads"]
    before = lib.allow_openmp(False)
    try:
        assert "on threads of their own" in about()["threads"]
    finally:
        lib.allow_openmp(before)


@pytest.mark.skipif(not _openmp_in_process(), reason="torch brought no OpenMP runtime here")
def test_every_worker_runs_when_openmp_gives_fewer_threads(tmp_path):
    """With OMP_THREAD_LIMIT=1 a call asking for 2 threads gets a team of one, which runs
    both workers' shares: the walks of one thread, every walk written."""
    namespace: dict = {}
    exec(_WALKS, namespace)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        expected = namespace["walks"]()
    finally:
        torch.set_num_threads(threads)
    saved = tmp_path / "walks.pt"
    script = f"""{_WALKS}
from graphemb._native.library import library
torch.set_num_threads(2)
assert library().uses_openmp
torch.save(walks(), {str(saved)!r})
"""
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert torch.equal(torch.load(saved), expected)


def _dropout_in_child(queue: multiprocessing.Queue) -> None:
    # numpy, not torch, makes the input: torch's own OpenMP threads do not survive fork()
    # either (a parallel torch op here would hang in libgomp, with or without graphemb)
    x = torch.from_numpy(numpy.arange(1 << 20, dtype=numpy.float32))
    queue.put(library().uses_openmp)
    queue.put(_dropout(x, 11).numpy())


def test_a_forked_child_runs_parallel_kernels():
    """Neither the pool's threads nor OpenMP's survive fork(): the child runs its parallel
    loops on a pool of its own (on OpenMP's, a child of a parent that used them hangs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.arange(1 << 20, dtype=torch.float32)
        parent = _dropout(x, 11)  # the parent's pool is running
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_dropout_in_child, args=(queue,))
        child.start()
        assert queue.get(timeout=60) is False  # the child keeps off OpenMP
        got = torch.from_numpy(queue.get(timeout=60))
        child.join(timeout=60)
        assert child.exitcode == 0
        torch.testing.assert_close(got, parent)
        torch.testing.assert_close(parent, _expected_dropout(x, 1 << 15, 2.0, 11))
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
        torch.testing.assert_close(results[position], _expected_dropout(x, 1 << 15, 2.0, position))


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


def test_what_a_call_allocated_is_freed_with_its_last_reference():
    """Arrays a kernel asked Python for (a graph's, a sampled batch's blocks) go when their
    owner goes, without waiting for the cyclic collector (disabled here): no reference
    cycle through the allocation callback keeps them."""
    import gc
    import weakref

    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler

    src = torch.arange(1000) % 97
    dst = (torch.arange(1000) * 7 + 3) % 97
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        graph = Graph.from_edges(src, dst, num_nodes=97)
        arrays = [weakref.ref(graph.indptr), weakref.ref(graph.indices)]
        *_, blocks = NeighborSampler([3, 3]).sample_blocks(graph, torch.arange(10))
        arrays += [weakref.ref(t) for b in blocks for t in (b.src_nodes, b.edge_index)]
        del graph, blocks, _
        alive = [ref() is not None for ref in arrays]
    finally:
        if was_enabled:
            gc.enable()
    assert not any(alive), f"still referenced: {alive}"
