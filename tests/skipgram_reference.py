"""An independent float64 reference of the compiled skip-gram trainer
(``graphemb_kernels.skipgram_train``, ``csrc/skipgram/``): word2vec's skip-gram with
negative sampling written from its published algorithm, one thread, driven by the random
stream the kernel documents (splitmix64). No code is shared with graphemb."""

from __future__ import annotations

import math

import numpy as np
import torch

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    """splitmix64's output function."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class SplitMix64:
    """Vigna's splitmix64 (the stream the kernel documents), in Python integers."""

    def __init__(self, state: int) -> None:
        self.state = state

    def next(self) -> int:
        self.state = (self.state + GAMMA) & M64
        return mix(self.state)

    def below(self, n: int) -> int:
        return (self.next() * n) >> 64

    def uniform(self) -> float:
        return (self.next() >> 11) * 2.0**-53


class Slots:
    """The noise distribution ``count ** 0.75`` as slots (the kernel's ``SlotNoise``): node
    ``v`` appears ``count(v)`` times in ``slots``; a slot's node is accepted with
    probability ``min(1, (floor / count(v)) ** 0.25)``, tested as
    ``coin^4 * count < floor``; with probability ``share`` the nodes below the floor are
    drawn instead: from the alias table ``alias`` (``(nodes, coins, aliases)``), or, with
    ``bound`` above 0, uniform nodes until one of count ``c`` in ``(0, floor)`` passes
    ``coin * bound < c ** 0.75 * floor ** 0.25 - c``."""

    def __init__(self, slots, floor: float, counts, alias, share: float, bound: float) -> None:
        self.slots, self.floor, self.counts = list(slots), float(floor), list(counts)
        self.alias, self.share, self.bound = alias, float(share), float(bound)


def node_of_key(key: int, noise) -> int:
    """The node of a fresh draw of key ``key``, read from the stream ``SplitMix64(key)``:
    with slots, first a uniform that picks the alias table below ``share``; then attempts,
    each an index below the table's size, then a coin. An alias table ``(nodes, coins,
    aliases)`` decides at the first attempt, slots accept or try again."""
    stream = SplitMix64(key)
    if isinstance(noise, Slots):
        if not stream.uniform() < noise.share:
            while True:
                index, coin = stream.below(len(noise.slots)), stream.uniform()
                node = noise.slots[index]
                if (coin * coin) * (coin * coin) * noise.counts[node] < noise.floor:
                    return node
        while noise.bound > 0:
            node, coin = stream.below(len(noise.counts)), stream.uniform()
            count = noise.counts[node]
            lack = count**0.75 * noise.floor**0.25 - count
            if 0 < count < noise.floor and coin * noise.bound < lack:
                return node
        noise = noise.alias
    nodes, coins, aliases = noise
    column = stream.below(len(nodes))
    return nodes[column] if stream.uniform() < coins[column] else aliases[column]


def counts_of(counts: torch.Tensor) -> list:
    """Per node counts from the kernel's ``counts``: an int64 indptr's differences, or the
    float64 values."""
    if counts.dtype == torch.int64:
        return (counts[1:] - counts[:-1]).double().tolist()
    return counts.tolist()


def keep_of(counts: list, threshold: float) -> list:
    """word2vec's keep probability of each count: ``min(1, (sqrt(c / t) + 1) * t / c)``; a
    threshold of 0 keeps everything."""
    if threshold == 0:
        return [1.0] * len(counts)
    safe = [max(c, 1e-300) for c in counts]
    return [min((math.sqrt(c / threshold) + 1) * threshold / c, 1.0) for c in safe]


class NoisePool:
    """Noise nodes as the kernel documents them (``csrc/skipgram/noise.h``): without a pool
    (``size`` 0) every one a fresh draw (one key of the stream); with one, ``size`` fresh
    draws first, then each noise node the content of a uniform slot; before every
    ``reuse``-th, a fresh draw is made for the next slot in turn, which takes it
    ``DELAY`` fresh draws later."""

    DELAY = 16

    def __init__(self, rng: SplitMix64, noise, size: int, reuse: int):
        self.rng, self.noise, self.reuse, self.left, self.next = rng, noise, reuse, reuse, 0
        self.slots = [self.fresh() for _ in range(size)]
        self.queue: list[tuple[int, int]] = []  # (slot, key) of the fresh draws on their way

    def fresh(self) -> int:
        return node_of_key(self.rng.next(), self.noise)

    def draw(self) -> int:
        if not self.slots:
            return self.fresh()
        self.left -= 1
        if self.left == 0:
            if len(self.queue) == self.DELAY:
                slot, key = self.queue.pop(0)
                self.slots[slot] = node_of_key(key, self.noise)
            self.queue.append((self.next, self.rng.next()))
            self.next = (self.next + 1) % len(self.slots)
            self.left = self.reuse
        return self.slots[self.rng.below(len(self.slots))]


def _noise(pool: NoisePool, word: int, count: int) -> list:
    """``count`` noise nodes, the node ``word`` itself skipped: the (target, label) pairs of
    one draw of noise nodes."""
    targets = [(word, 1.0)]
    for _ in range(count):
        target = pool.draw()
        if target != word:
            targets.append((target, 0.0))
    return targets


def reference(
    walks, syn0, syn1, counts, noise, window, negatives, lr, before, total, seed, hold=1,
    sharing="pair", pool=0, reuse=1, threshold=0.0,
):  # fmt: skip
    """word2vec's skip-gram with negative sampling in float64, one thread; the rate is
    recomputed at the start of every block of ``hold`` walks of the run.

    ``sharing="pair"``: every (context, node) pair draws its own ``negatives`` noise nodes
    (word2vec); ``"position"``: a position draws them once, right after its window's
    radius when the window holds a context, and every context of the window trains against
    them. Either way a context's targets are trained one after the other, its input row
    changed after the last. ``pool`` and ``reuse``: where noise nodes come from
    (:class:`NoisePool`).
    """
    count = counts_of(counts)
    if isinstance(noise, tuple):
        noise = tuple(t.tolist() for t in noise)
    else:  # the kernel's SlotNoise
        alias = tuple(t.tolist() for t in noise.alias)
        noise = Slots(
            noise.slots.tolist(), noise.floor, count, alias, noise.alias_share, noise.lack_bound
        )
    syn0, syn1 = syn0.double().numpy().copy(), syn1.double().numpy().copy()
    keep = keep_of(count, threshold)
    rng = SplitMix64(mix(seed))
    noise = NoisePool(rng, noise, pool, reuse)
    for index, walk in enumerate(walks.tolist()):
        block_start = (before + index) - (before + index) % hold
        alpha = lr * max(1.0 - (1.0 - 1.0 / 250) * block_start / total, 1.0 / 250)
        kept = []
        for node in walk:
            if node < 0:
                break
            if keep[node] >= 1.0 or rng.uniform() < keep[node]:
                kept.append(node)
        for pos, word in enumerate(kept):
            radius = 1 + rng.below(window)
            contexts = [
                c
                for c in range(max(pos - radius, 0), min(pos + radius, len(kept) - 1) + 1)
                if c != pos
            ]
            if sharing == "position" and contexts:
                shared = _noise(noise, word, negatives)
            for c in contexts:
                row = syn0[kept[c]]
                neu1e = np.zeros_like(row)
                targets = shared if sharing == "position" else _noise(noise, word, negatives)
                for target, label in targets:
                    g = (label - 1.0 / (1.0 + math.exp(-row @ syn1[target]))) * alpha
                    neu1e += g * syn1[target]
                    syn1[target] += g * row
                row += neu1e
    return torch.from_numpy(syn0), torch.from_numpy(syn1)
