"""The compiled skip-gram trainer's variants that the DeepWalk benchmarks compare: one table,
named per benchmark by a prefix (``compiled`` in the quality panel, ``graphemb`` in the scale
panel), so that a variant means the same options everywhere.

* ``""`` (the prefix alone): the default: noise nodes drawn per (context, node) pair,
  fresh draws (word2vec's algorithm) for output tables up to 32 MiB, each fresh draw serving
  10 of them beyond (``CompiledOptions.noise_reuse`` None), the output table in float32;
* ``fresh``: word2vec's algorithm at every size (a fresh draw of noise nodes for every
  pair);
* ``float24``, ``bfloat16``: the output table in that type (``CompiledOptions.output_dtype``);
* ``position``: one draw of noise nodes per walk position, shared by all the contexts of its
  window (HogBatch);
* ``pool``, ``pool-2``: shared per position, taken from each thread's pool of fresh draws,
  every fresh draw serving 5 (2) noise nodes;
* ``pair-pool``, ``pair-pool-10``, ``pair-pool-20``: drawn per pair, in word2vec's order,
  from the pool, every fresh draw serving 5 (10, 20) noise nodes.

The table holds keyword arguments of :class:`graphemb.skipgram.CompiledOptions`, not the
objects, so that a benchmark's parent process, which only starts its contenders, imports
neither torch nor graphemb.
"""

from __future__ import annotations

VARIANTS: dict[str, dict[str, object]] = {
    "": {},
    "fresh": {"noise_reuse": 1},
    "float24": {"output_dtype": "float24"},
    "bfloat16": {"output_dtype": "bfloat16"},
    "position": {"sharing": "position"},
    "pool": {"sharing": "position", "noise_reuse": 5},
    "pool-2": {"sharing": "position", "noise_reuse": 2},
    "pair-pool": {"noise_reuse": 5},
    "pair-pool-10": {"noise_reuse": 10},
    "pair-pool-20": {"noise_reuse": 20},
}


def named(prefix: str) -> dict[str, dict[str, object]]:
    """:data:`VARIANTS` under a benchmark's names: ``prefix``, ``prefix-position``, ..."""
    return {f"{prefix}-{name}" if name else prefix: kwargs for name, kwargs in VARIANTS.items()}
