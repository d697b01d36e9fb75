"""Checks of the tensors handed to the compiled kernels, and their C dtype codes.

The library reads raw memory: every tensor it gets must be on the CPU, contiguous, of the
dtype and number of dimensions the kernel expects. These checks raise before the call,
naming the kernel, the argument and the bad value (``graphemb_kernels.adam: weight must be
contiguous, got sizes [10, 4] with strides [1, 10]``).
"""

from __future__ import annotations

import ctypes

import torch

__all__ = ["DTYPE_CODES", "check_dtype", "check_tensor", "dtype_code", "dtype_name", "pointers"]

DTYPE_CODES = {
    torch.float32: 0,
    torch.float64: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.int32: 4,
    torch.int64: 5,
}
"""``ge_dtype`` of ``csrc/graphemb_kernels.h`` for each dtype the kernels read."""


def dtype_name(dtype: torch.dtype) -> str:
    """torch's Python name of a dtype (``"int64"``)."""
    return str(dtype).removeprefix("torch.")


def dtype_code(dtype: torch.dtype) -> int:
    """The ``ge_dtype`` code of ``dtype``."""
    return DTYPE_CODES[dtype]


def check_tensor(kernel: str, tensor: torch.Tensor, name: str, dim: int) -> None:
    """``tensor`` on the CPU, of ``dim`` dimensions, contiguous; else ValueError."""
    prefix = f"graphemb_kernels.{kernel}: {name}"
    if tensor.device.type != "cpu":
        raise ValueError(f"{prefix} must be a CPU tensor, got one on {tensor.device}")
    if tensor.dim() != dim:
        raise ValueError(f"{prefix} must have {dim} dimension(s), got shape {list(tensor.shape)}")
    if not tensor.is_contiguous():
        raise ValueError(
            f"{prefix} must be contiguous, got sizes {list(tensor.shape)} with strides "
            f"{list(tensor.stride())}"
        )


def check_dtype(
    kernel: str, tensor: torch.Tensor, name: str, expected: torch.dtype, why: str
) -> None:
    """``tensor`` of dtype ``expected``; else TypeError saying ``why`` it must be."""
    if tensor.dtype != expected:
        raise TypeError(
            f"graphemb_kernels.{kernel}: {name} must be {dtype_name(expected)} ({why}), got "
            f"{dtype_name(tensor.dtype)}"
        )


def pointers(tensors: list[torch.Tensor]) -> ctypes.Array[ctypes.c_void_p]:
    """The data pointers of ``tensors`` as a C array of ``void*``."""
    return (ctypes.c_void_p * max(len(tensors), 1))(*[t.data_ptr() for t in tensors])
