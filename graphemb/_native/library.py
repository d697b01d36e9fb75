"""The compiled kernels' shared library: found in the package, loaded with ctypes.

The library (``graphemb/_kernels.abi3.so``, built from ``csrc/`` by every install of
graphemb) is plain C++ behind the C interface of ``csrc/graphemb_kernels.h``: pointers,
sizes and status codes, no Python and no torch. This module declares that interface to
ctypes, turns a failed call's status into the Python error it names (with the message the
library kept), hands the library torch's thread count before each call, and lends it
memory for outputs whose sizes depend on the data (:class:`Outputs`).

ctypes releases the GIL for the duration of each call.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from ctypes import POINTER, c_char, c_char_p, c_double, c_int, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "ABI_VERSION",
    "DECLINED",
    "DropoutMask",
    "Library",
    "Outputs",
    "library",
    "library_path",
    "load_error",
    "span",
]

ABI_VERSION = 13
"""``GE_ABI_VERSION`` of ``csrc/graphemb_kernels.h`` that these bindings speak."""

DECLINED = 7
"""``GE_DECLINED``: not a failure; the input is outside what the kernel reads."""
_CALLBACK_ERROR = 6
_ERRORS: dict[int, type[Exception]] = {
    1: ValueError,
    2: IndexError,
    3: TypeError,
    4: MemoryError,
    5: RuntimeError,
}

_ALLOCATE = ctypes.CFUNCTYPE(c_int, c_void_p, c_int64, c_int64, POINTER(c_void_p))
_P = c_void_p  # a tensor's data pointer (an int)


class DropoutMask(ctypes.Structure):
    """``ge_dropout_mask``: dropout's threshold, scale and key, for the kernels that drop
    the rows they read or write."""

    _fields_ = [("threshold", c_uint32), ("scale", c_double), ("key", c_uint64)]


_MASK = POINTER(DropoutMask)  # None: no mask

# name -> (result type, argument types): the functions of csrc/graphemb_kernels.h
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ge_abi_version": (c_int, []),
    "ge_last_error": (c_char_p, []),
    "ge_simd_level": (c_char_p, []),
    "ge_set_num_threads": (None, [c_int]),
    "ge_num_threads": (c_int, []),
    "ge_set_openmp": (c_int, [c_int]),
    "ge_uses_openmp": (c_int, []),
    "ge_formula_count": (c_int, []),
    "ge_formula_spec": (c_char_p, [c_int]),
    "ge_fused_update": (
        c_int,
        [
            c_int,
            _P,
            c_int,
            c_int64,
            c_int64,
            POINTER(c_void_p),
            c_int64,
            _P,
            _P,
            c_int64,
            POINTER(c_void_p),
            POINTER(c_int64),
            c_int64,
            c_int,
            c_double,
            POINTER(c_double),
            c_int64,
        ],
    ),
    "ge_sort_rows": (c_int, [_P, c_int64, c_int64, _P, _P]),
    "ge_gather_rows": (c_int, [_P, c_int64, c_int64, _P, c_int64, _P]),
    "ge_csc_from_edges": (
        c_int,
        [_P, c_int64, _P, c_int64, c_int64, c_int64, c_int, _P, _ALLOCATE, c_void_p],
    ),
    "ge_parse_integer_edges": (
        c_int,
        [c_char_p, c_int64, c_char, c_int, c_int, c_int64, _ALLOCATE, c_void_p, POINTER(c_int64)],
    ),
    "ge_sample_layer": (
        c_int,
        [_P, _P, c_int64, _P, c_int64, c_int64, c_uint64, _ALLOCATE, c_void_p],
    ),
    "ge_random_order": (
        c_int,
        [c_int64, c_int64, _P, c_int64, c_int, c_int64, c_int64, _P, c_int64],
    ),
    "ge_random_walks": (
        c_int,
        [_P, _P, _P, _P, c_int64, _P, c_int64, c_int64, c_int64, c_double, c_double, c_uint64, _P],
    ),
    "ge_sample_blocks": (
        c_int,
        [
            _P,
            _P,
            c_int64,
            _P,
            c_int64,
            _P,
            c_int64,
            c_uint64,
            _P,
            c_int,
            c_int64,
            _ALLOCATE,
            c_void_p,
        ],
    ),
    "ge_csr_aggregate": (
        c_int,
        [_P, c_int64, _P, c_int64, _P, _P, c_int64, c_int64, c_int, c_int, _MASK, _P, c_int, c_int]
        + [_P, c_int64],  # dense_ids, sources
    ),
    "ge_csr_aggregate_transposed": (
        c_int,
        [_P, c_int64, _P, c_int64, _P, c_int64, c_int, c_int]  # crow ... mean
        + [_P, c_int64, _MASK, _P, c_int64, c_int, _P],  # addend ... relu_input
    ),
    "ge_dropout_masked_scale": (c_int, [_P, _P, c_int64, c_int, c_uint32, c_double, c_uint64]),
    "ge_skipgram_train": (c_int, [c_void_p, POINTER(c_int64)]),
}


def library_path() -> Path | None:
    """Where the built library lies in the package, or None when it was not built."""
    package = Path(__file__).resolve().parent.parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = package / f"_kernels{suffix}"
        if candidate.is_file():
            return candidate
    return None


class Outputs:
    """The memory a call asks for, slot by slot: ``make(slot, count)`` returns a contiguous
    CPU tensor of ``count`` elements, kept in :attr:`tensors` under its slot.

    A failure inside ``make`` (an exception) is kept in :attr:`error` and raised again by
    :meth:`Library.call` when the library reports the failed allocation.

    The callback refers to the slots' dictionary, not to this object: a cycle through it
    (object, callback, closure, object) would keep every tensor of the call alive after
    its caller dropped them, until Python's cyclic collector came by (a graph's arrays,
    each sampled batch's blocks).
    """

    def __init__(self, make: Callable[[int, int], torch.Tensor]) -> None:
        tensors: dict[int, torch.Tensor] = {}
        errors: list[BaseException] = []

        def allocate(_context: int | None, slot: int, count: int, out: Any) -> int:
            try:
                tensor = make(slot, count)
                tensors[slot] = tensor
                out[0] = tensor.data_ptr()
                return 0
            except BaseException as error:  # raised again after the call returns
                errors.append(error)
                return 1

        self.tensors = tensors
        self._errors = errors
        self.callback = _ALLOCATE(allocate)  # kept alive for the duration of the call

    @property
    def error(self) -> BaseException | None:
        """The exception ``make`` raised, if it did."""
        return self._errors[0] if self._errors else None


class Library:
    """The loaded library: ``call(name, *args)`` runs a function of its C interface."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._dll = ctypes.CDLL(str(path))
        for name, (result, arguments) in _SIGNATURES.items():
            function = getattr(self._dll, name)  # AttributeError: not our library
            function.restype = result
            function.argtypes = arguments
        self._threads = 0

    @property
    def abi_version(self) -> int:
        return int(self._dll.ge_abi_version())

    @property
    def simd_level(self) -> str:
        """The widest SIMD level the CPU runs among those the kernels were compiled for."""
        return bytes(self._dll.ge_simd_level()).decode()

    @property
    def num_threads(self) -> int:
        """Threads of the kernels' parallel loops (torch's, as of the last call)."""
        return int(self._dll.ge_num_threads())

    @property
    def uses_openmp(self) -> bool:
        """Whether the parallel loops run on the OpenMP runtime torch loaded (its threads,
        already awake after torch's own operations), rather than on threads of the
        library's own."""
        return bool(self._dll.ge_uses_openmp())

    def allow_openmp(self, allowed: bool) -> bool:
        """Let the parallel loops run on the process's OpenMP runtime (the default), or
        keep them on the library's own threads; returns the previous setting."""
        return bool(self._dll.ge_set_openmp(int(bool(allowed))))

    def function(self, name: str) -> Any:
        """The raw ctypes function ``name`` (for the few that return no status)."""
        return getattr(self._dll, name)

    def call(self, name: str, *args: Any, outputs: Outputs | None = None) -> int:
        """Run ``name(*args)``; raise the error its status names, else return the status
        (0, or :data:`DECLINED`)."""
        threads = torch.get_num_threads()
        if threads != self._threads:
            self._dll.ge_set_num_threads(threads)
            self._threads = threads
        status = int(getattr(self._dll, name)(*args))
        if status in (0, DECLINED):
            return status
        if status == _CALLBACK_ERROR and outputs is not None and outputs.error is not None:
            raise outputs.error
        message = bytes(self._dll.ge_last_error() or b"").decode(errors="replace")
        raise _ERRORS.get(status, RuntimeError)(message or f"{name} failed (status {status})")


def _load() -> tuple[Library | None, str]:
    path = library_path()
    if path is None:
        return None, (
            "the compiled kernels were not built with this install (no C++ compiler when it "
            "was installed?)"
        )
    try:
        loaded = Library(path)
    except (OSError, AttributeError) as error:
        return None, f"the compiled kernels at {path} do not load ({error})"
    if loaded.abi_version != ABI_VERSION:
        return None, (
            f"the compiled kernels at {path} speak interface {loaded.abi_version}, these "
            f"bindings {ABI_VERSION}: they were built from other sources"
        )
    return loaded, ""


_library, _load_error = _load()


def library() -> Library:
    """The loaded library; RuntimeError naming why when it did not load."""
    if _library is None:
        raise RuntimeError(f"graphemb_kernels: {_load_error}")
    return _library


def load_error() -> str:
    """Why the library did not load; ``""`` when it did."""
    return _load_error


def span(name: str) -> AbstractContextManager[Any]:
    """A ``torch.profiler`` span ``name`` while a profiler records, else nothing."""
    if torch.autograd._profiler_enabled():
        return torch.autograd.profiler.record_function(name)
    return nullcontext()
