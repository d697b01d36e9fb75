"""The harness of graphemb's benchmarks (imported by every ``benchmarks/bench_*.py``).

One concept per module:

========== ===============================================================================
cli        the options every benchmark shares and their default / ``--quick`` sizes
workload   batches of random ids, the losses, expected unique rows, a rank's share
timing     timed blocks of steps, interleaved rounds, medians, per-round ratios
bandwidth  the copy-bandwidth probe and the bytes-moved bound of an update
peers      the contenders: graphemb, torch ``nn.Embedding(sparse=True)``, DGL
phases     per-phase profiles read back from ``torch.profiler.record_function`` spans
ranks      ``RankPool``: gloo ranks (graphemb.testing.LocalRanks) that run timed blocks on command
memory     RSS and shared-memory samples of processes, linear trends (the soak)
report     header, environment, aligned tables, the ``BENCH_SUMMARY`` line
========== ===============================================================================

The scripts run as ``python benchmarks/bench_x.py``: Python puts ``benchmarks/`` first on
``sys.path``, so ``import harness`` finds this package (spawned ranks inherit the path).

Importing the harness turns on torch's huge-page CPU allocations as importing graphemb does
(:mod:`graphemb._allocator`), before any tensor exists: every contender of a run, graphemb's
and its peers', allocates the same way (``THP_MEM_ALLOC_ENABLE=0`` keeps them all off).
"""

from graphemb._allocator import default_huge_page_allocations

default_huge_page_allocations()
