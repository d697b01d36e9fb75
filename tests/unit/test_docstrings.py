"""The examples in graphemb's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import graphemb


def modules():
    names = []
    for info in pkgutil.walk_packages(graphemb.__path__, "graphemb."):
        if info.name == "graphemb._kernels":  # the compiled library: loaded by ctypes
            continue
        if info.name.startswith("graphemb.dgl"):
            names.append(pytest.param(info.name, marks=pytest.mark.dgl))
        else:
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", modules())
def test_docstring_examples(name):
    if name.startswith("graphemb.dgl"):
        pytest.importorskip("dgl", reason="graphemb.dgl needs DGL (the dgl stack)")
    if name.startswith("graphemb.nn"):
        pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
