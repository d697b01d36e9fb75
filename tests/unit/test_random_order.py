"""``RandomOrder`` (graphemb.sampling.permutation): a seeded permutation of ``0 .. n - 1``
computed chunk by chunk.

Oracles: ``arange`` (every order sorts back to it), a scalar re-implementation of the
documented construction in exact Python integers (so the int64 tensor arithmetic -- the
wrapped multiplier, the folded first xorshift, the masks -- is checked against plain
arithmetic up to ``n = 2**62``; on CPU the compiled kernel computes the values, checked
against the same reference as the tensor code), and chi-square tests of uniformity (scipy) over many
seeds for ``n = 8`` and over one large order. Each statistical check is deterministic
(fixed seeds) and is shown to reject orders that are wrong in the way it looks for.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import DEVICES
from scipy import stats

from graphemb.sampling.permutation import MAX_NODES, RandomOrder

P_VALUE = 1e-3
MASK32, MASK64 = 2**32 - 1, 2**64 - 1

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: one torch thread


# ---------------------------------------------------------------------------- the oracle
def splitmix64_low_halves(seed: int, count: int) -> list[int]:
    keys, state = [], seed
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        keys.append((z ^ (z >> 31)) & MASK32)
    return keys


def lowbias32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def reference_values(n: int, seed: int, positions: list[int]) -> list[int]:
    """The documented construction, one position at a time: Feistel rounds on k-bit halves
    (12 rounds if k <= 4, else 8), the seeded swap of 0 and 1, cycle walking into [0, n)."""
    k = max(1, math.ceil(max(n - 1, 1).bit_length() / 2))
    rounds = 12 if k <= 4 else 8
    keys = splitmix64_low_halves(seed, rounds + 1)

    def encrypt(value: int) -> int:
        left, right = value >> k, value & ((1 << k) - 1)
        for key in keys[:rounds]:
            left, right = right, left ^ (lowbias32(right ^ key) >> (32 - k))
        value = (left << k) | right
        return value ^ 1 if keys[rounds] & 1 and value < 2 else value

    values = []
    for position in positions:
        value = encrypt(position)
        while value >= n:
            value = encrypt(value)
        values.append(value)
    return values


@pytest.mark.parametrize(
    "n", [1, 2, 5, 17, 1000, 10_000_000, 2**32 + 5, 2**40, 2**40 + 1, 2**62 - 1, MAX_NODES]
)
def test_values_match_the_construction_in_exact_integers(n, device):
    """Halves of 1 to 31 bits: both branches of the round function, the int64 limits; the
    compiled kernel (cpu-kernels) and the tensor code (cpu-torch, cuda)."""
    for seed in (0, 3, 2**64 - 1):
        order = RandomOrder(n, seed, device=device)
        for start in (0, max(0, n - 40), n // 3):
            stop = min(n, start + 40)
            expected = reference_values(n, seed, list(range(start, stop)))
            assert order.chunk(start, stop).cpu().tolist() == expected, (n, seed, start)


# ---------------------------------------------------------------------------- structure
SIZES = [0, 1, 2, 3, 4, 5, 8, 15, 16, 17, 64, 65, 1000, 4096, 4097, 65536, 100_003]


@pytest.mark.parametrize("n", SIZES)
def test_every_order_is_a_permutation(n, device):
    for seed in (0, 1, 2, 12345, 2**63, 2**64 - 1):
        whole = RandomOrder(n, seed, device=device).chunk(0, n).cpu()
        assert whole.dtype == torch.int64 and whole.shape == (n,)
        assert torch.equal(whole.sort().values, torch.arange(n)), (n, seed)


def test_large_orders_hold_distinct_values_in_range():
    """2**40 values: too many to sort, but any window of positions maps to distinct ones."""
    n = 2**40 + 12345
    order = RandomOrder(n, 99)
    for start in (0, n // 2, n - 100_000):
        values = order.chunk(start, start + 100_000)
        assert int(values.min()) >= 0 and int(values.max()) < n
        assert values.unique().numel() == values.numel()


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 3 * 2**15 + 3])
def test_chunks_concatenate_to_the_whole_order(n, device):
    order = RandomOrder(n, 5, device=device)
    whole = order.chunk(0, n)
    for size in (1, 3, 1000, 2**15 - 1, 2**15 + 1, n + 5):
        parts = list(order.chunks(size))
        assert [part.numel() for part in parts] == [
            min(size, n - begin) for begin in range(0, n, size)
        ]
        assert torch.equal(torch.cat(parts) if parts else whole, whole), size
    if n:
        cut = sorted({0, n // 3, n // 2, n})
        pieces = [order.chunk(a, b) for a, b in zip(cut, cut[1:], strict=False)]
        assert torch.equal(torch.cat(pieces), whole)
        positions = torch.tensor([n - 1, 0, n // 2, n - 1], device=device)
        assert torch.equal(order.at(positions), whole[positions])
        assert order.at(positions.view(2, 2)).shape == (2, 2)


@pytest.mark.parametrize("n", [0, 7, 1000, 3 * 2**15 + 3])
def test_chunks_into_a_buffer_are_the_order_written_over_it(n, device):
    order = RandomOrder(n, 5, device=device)
    whole = order.chunk(0, n)
    for size in (7, 1000, n + 5) if n <= 1000 else (1000, 2**15 + 1, n + 5):
        out = torch.full((min(size, n) + 2,), -1, dtype=torch.int64, device=device)
        lengths = []
        for begin, part in zip(range(0, n, size), order.chunks(size, out=out), strict=True):
            assert part.data_ptr() == out.data_ptr(), (size, begin)  # a view, nothing new
            assert torch.equal(part, whole[begin : begin + size]), (size, begin)
            lengths.append(part.numel())
        assert lengths == [min(size, n - begin) for begin in range(0, n, size)]
    if n:
        target = torch.empty(n // 2, dtype=torch.int64, device=device)
        assert order.chunk(1, 1 + n // 2, out=target).data_ptr() == target.data_ptr()
        assert torch.equal(target, whole[1 : 1 + n // 2])
        # a column of a matrix: the values land in that column, the others are untouched
        matrix = torch.full((n // 2, 3), -7, dtype=torch.int64, device=device)
        assert order.chunk(1, 1 + n // 2, out=matrix[:, 1]).data_ptr() == matrix[:, 1].data_ptr()
        assert torch.equal(matrix[:, 1], whole[1 : 1 + n // 2])
        assert bool((matrix[:, 0::2] == -7).all())
        size = min(1000, n)
        column = torch.full((size, 2), -7, dtype=torch.int64, device=device)[:, 1]
        parts = [part.clone() for part in order.chunks(size, out=column)]
        assert torch.equal(torch.cat(parts), whole)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda order, out: order.chunk(0, 3, out=out), "of 3 distinct entries.*shape \\(8,\\)"),
        (lambda order, out: order.chunk(0, 3, out=out[:3].view(torch.float64)), "float64"),
        (lambda order, out: order.chunk(0, 3, out=out[:1].expand(3)), "strides \\(0,\\)"),
        (lambda order, out: list(order.chunks(4, out=out[:3])), "at least 4 distinct entries"),
        (lambda order, out: list(order.chunks(4, out=out.view(2, 4))), "shape \\(2, 4\\)"),
    ],
)
def test_a_bad_buffer_is_refused_and_left_as_it_was(call, message, device):
    out = torch.full((8,), -1, dtype=torch.int64, device=device)
    with pytest.raises(ValueError, match=message):
        call(RandomOrder(5, 0, device=device), out)
    assert bool((out == -1).all())


@pytest.mark.parametrize("device", DEVICES)
def test_the_same_seed_gives_the_same_order_on_every_device(device):
    n = 50_000
    expected = RandomOrder(n, 42).chunk(0, n)
    order = RandomOrder(n, 42, device=device)
    got = order.chunk(0, n)
    assert got.device.type == torch.device(device).type
    assert torch.equal(got.cpu(), expected)
    assert torch.equal(torch.cat(list(order.chunks(4096))).cpu(), expected)


def test_different_seeds_give_unrelated_orders():
    """Two orders from different seeds agree at about one position (the expected number of
    fixed points of the uniform permutation relating them is 1)."""
    n = 1000
    orders = [RandomOrder(n, seed).chunk(0, n) for seed in range(40)]
    agreements = [int((orders[a] == orders[b]).sum()) for a in range(40) for b in range(a + 1, 40)]
    assert max(agreements) < 10
    assert 0.5 < float(np.mean(agreements)) < 1.5  # 780 pairs: the mean is 1 +- 0.04
    fixed = sum(int((order == torch.arange(n)).sum()) for order in orders)
    assert stats.poisson.cdf(fixed, 40) > P_VALUE and stats.poisson.sf(fixed - 1, 40) > P_VALUE


# ---------------------------------------------------------------------------- uniformity
def parity(order: list[int]) -> int:
    """0 for an even permutation, 1 for an odd one (sorting by transpositions)."""
    order, swaps = list(order), 0
    for i in range(len(order)):
        while order[i] != i:
            j = order[i]
            order[i], order[j] = order[j], order[i]
            swaps += 1
    return swaps % 2


def small_order_p_values(orders: np.ndarray) -> dict[str, float]:
    """Orders (S, n), one per row: p-values that every position's value is uniform (the
    smallest, times n), that the values at positions (0, 1) are a uniform pair of distinct
    values, and that odd and even orders are equally frequent."""
    count, n = orders.shape
    per_position = min(
        stats.chisquare(np.bincount(orders[:, i], minlength=n)).pvalue for i in range(n)
    )
    pairs = np.bincount(orders[:, 0] * n + orders[:, 1], minlength=n * n).reshape(n, n)
    odd = sum(parity(order) for order in orders.tolist())
    return {
        "position": min(1.0, per_position * n),
        "pair": stats.chisquare(pairs[~np.eye(n, dtype=bool)]).pvalue,
        "parity": stats.binomtest(odd, count).pvalue,
    }


def cycle_walked(permutation: list[int], n: int) -> list[int]:
    out = []
    for x in range(n):
        y = permutation[x]
        while y >= n:
            y = permutation[y]
        out.append(y)
    return out


def test_orders_of_eight_values_look_uniform():
    """2000 seeds: each position's value, the first two values, the parity."""
    n, count = 8, 2000
    orders = np.stack([RandomOrder(n, seed).chunk(0, n).numpy() for seed in range(count)])
    p_values = small_order_p_values(orders)
    assert min(p_values.values()) > P_VALUE, p_values
    # the checks catch what they look for: rotations (uniform positions, fixed pairs) ...
    rotations = (np.arange(n)[None, :] + np.arange(count)[:, None]) % n
    assert small_order_p_values(rotations)["pair"] < 1e-6
    # ... and cycle walking from even permutations of 16 values (a Feistel network without
    # the seeded swap, if its rounds mixed perfectly): about 39 % odd orders
    gen = torch.Generator().manual_seed(0)
    even = []
    for _ in range(count):
        permutation = torch.randperm(16, generator=gen).tolist()
        if parity(permutation):
            permutation[0], permutation[1] = permutation[1], permutation[0]
        even.append(cycle_walked(permutation, n))
    assert small_order_p_values(np.array(even))["parity"] < 1e-6


def large_order_p_values(values: torch.Tensor) -> dict[str, float]:
    """One order of n values: p-values of chi-square tests of independence between the
    position's and the value's sixteenth of [0, n), their low 4 bits, and the sixteenths
    of consecutive values; and the z-test of the ascents (mean (n - 1) / 2, variance
    (n + 1) / 12)."""
    n = values.numel()
    position = torch.arange(n)

    def independence(a: torch.Tensor, b: torch.Tensor) -> float:
        table = torch.bincount(a * 16 + b, minlength=256).view(16, 16).numpy()
        return stats.chi2_contingency(table).pvalue

    ascents = int((values[1:] > values[:-1]).sum())
    z = (ascents - (n - 1) / 2) / math.sqrt((n + 1) / 12)
    return {
        "sixteenths": independence(position * 16 // n, values * 16 // n),
        "low bits": independence(position & 15, values & 15),
        "neighbours": independence(values[:-1] * 16 // n, values[1:] * 16 // n),
        "ascents": 2 * stats.norm.sf(abs(z)),
    }


@pytest.mark.parametrize("n", [786_433, 2**20])  # cycle walking, and none (a power of 4)
def test_a_large_order_looks_uniform(n):
    for seed in (0, 1):
        p_values = large_order_p_values(RandomOrder(n, seed).chunk(0, n))
        assert min(p_values.values()) > P_VALUE, (seed, p_values)
    # the checks catch a structured order: an affine map i -> (a i + b) mod n
    a = round(n * 0.618) | 1
    while math.gcd(a, n) != 1:
        a += 2
    affine = (torch.arange(n) * a + 12345) % n
    assert sorted(affine.tolist()) == list(range(n))
    bad = large_order_p_values(affine)
    assert bad["ascents"] < 1e-6 and bad["neighbours"] < 1e-6, bad


# ---------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: RandomOrder(-1, 0), ValueError, "num_nodes must be an integer >= 0, got -1"),
        (lambda: RandomOrder(2.0, 0), ValueError, "num_nodes must be an integer"),
        (lambda: RandomOrder(MAX_NODES + 1, 0), ValueError, f"at most .*got {MAX_NODES + 1}"),
        (lambda: RandomOrder(5, -1), ValueError, r"seed must be .*\[0, 2\*\*64\), got -1"),
        (lambda: RandomOrder(5, 2**64), ValueError, f"got {2**64}"),
        (lambda: RandomOrder(5, 1.5), TypeError, "seed must be an integer.*1.5"),
        (lambda: RandomOrder(5, True), TypeError, "seed must be an integer.*True"),
        (lambda: RandomOrder(5, 0).chunk(3, 2), ValueError, "start=3, stop=2"),
        (lambda: RandomOrder(5, 0).chunk(0, 6), ValueError, "num_nodes = 5.*stop=6"),
        (lambda: RandomOrder(5, 0).chunk(-1, 2), ValueError, "start must be .*got -1"),
        (lambda: list(RandomOrder(5, 0).chunks(0)), ValueError, "size must be .*>= 1, got 0"),
        (lambda: RandomOrder(5, 0).at(torch.tensor([1, 5])), ValueError, "got 5"),
        (lambda: RandomOrder(5, 0).at(torch.tensor([-2])), ValueError, "got -2"),
        (lambda: RandomOrder(5, 0).at(torch.tensor([1.0])), TypeError, "integers"),
        (lambda: RandomOrder(5, 0).at(torch.tensor([True])), TypeError, "integers"),
        (lambda: RandomOrder(5, 0).at([1]), TypeError, "integers"),
    ],
)
def test_bad_arguments_are_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_properties_and_accepted_integer_types():
    order = RandomOrder(np.int64(12), np.uint64(2**64 - 1))
    assert (order.num_nodes, order.seed, len(order)) == (12, 2**64 - 1, 12)
    assert order.device == torch.device("cpu")
    assert repr(order) == f"RandomOrder(num_nodes=12, seed={2**64 - 1})"
    assert torch.equal(order.chunk(0, 12), RandomOrder(12, 2**64 - 1).chunk(0, 12))
    assert RandomOrder(0, 0).chunk(0, 0).shape == (0,) and list(RandomOrder(0, 0).chunks(3)) == []


@pytest.mark.parametrize(
    "arguments, message",
    [
        ((5, 1, [1, 2], False, 0, 5), r"num_nodes = 5 outside \[0, 4\*\*1\]"),
        ((5, 32, [1, 2], False, 0, 5), r"half_bits = 32 must lie in \[1, 31\]"),
        ((5, 2, [1, 2], False, 3, 3), r"positions \[3, 6\) outside \[0, 5\)"),
        ((5, 2, [1, -1], False, 0, 5), r"every key must lie in \[0, 2\*\*32\)"),
        ((5, 2, [1, 2**32], False, 0, 5), r"every key must lie in \[0, 2\*\*32\)"),
    ],
)
def test_the_compiled_order_refuses_bad_arguments(arguments, message):
    from graphemb._native.sampling import random_order

    with pytest.raises(ValueError, match=message):
        random_order(*arguments)


def test_the_compiled_order_refuses_a_bad_buffer():
    from graphemb._native.sampling import random_order

    out = torch.full((6,), -1, dtype=torch.int64)
    # of 6 entries for 3 positions, broadcast (one entry for three), of float64
    for count, bad in ((3, out), (3, out[:1].expand(3)), (5, out[:5].view(torch.float64))):
        with pytest.raises(ValueError, match="out must be an int64 CPU vector"):
            random_order(5, 2, [1, 2], False, 0, count, bad)
    assert bool((out == -1).all())
    written = random_order(5, 2, [1, 2], False, 0, 5, out[:5])
    assert written.data_ptr() == out.data_ptr()
    expected = random_order(5, 2, [1, 2], False, 0, 5)
    assert torch.equal(written, expected)
    # every other entry of a buffer: those entries, and only those, are written
    spaced = torch.full((10,), -1, dtype=torch.int64)
    random_order(5, 2, [1, 2], False, 0, 5, spaced[::2])
    assert torch.equal(spaced[::2], expected) and bool((spaced[1::2] == -1).all())
