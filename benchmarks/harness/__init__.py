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
isolated   contenders in fresh processes of their own, run block by block on command
fresh      one whole run in a fresh process, its ``RESULT {json}`` line read back
allocation the allocator settings of a run (huge pages, OpenMP waiting), set explicitly
memory     RSS and shared-memory samples of processes, linear trends (the soak)
report     header, environment, aligned tables, the ``BENCH_SUMMARY`` line
========== ===============================================================================

The scripts run as ``python benchmarks/bench_x.py``: Python puts ``benchmarks/`` first on
``sys.path``, so ``import harness`` finds this package (spawned ranks inherit the path).

Importing the harness changes nothing: no environment variable, no thread count, no import
of graphemb. Each benchmark chooses its allocator settings explicitly, right after parsing
its options and before its first tensor (:func:`harness.cli.apply_allocator`, from the
options every parser of :mod:`harness.cli` has); a contender in a process of its own
(:mod:`harness.isolated`) inherits the same settings through its environment.
"""
