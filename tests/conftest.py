import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # helpers (_multiprocess, oracles) for spawned ranks too

CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)
DEVICES = ["cpu", CUDA]


@pytest.fixture(params=DEVICES)
def device(request):
    """Every single-process test runs on CPU, and on CUDA where a GPU exists."""
    return torch.device(request.param)
