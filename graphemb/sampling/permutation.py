"""A random order of ``0 .. n - 1`` that is never stored: :class:`RandomOrder` computes the
value at any position of a seeded pseudo-random permutation, so a round over 10M nodes is
produced chunk by chunk in memory O(chunk) instead of an int64 ``randperm`` of 80 MB.

The permutation is a keyed Feistel network on the smallest domain of ``4**k >= n`` values
(``k``-bit halves, ``k >= 1``), restricted to ``[0, n)`` by cycle walking: a value outside
is encrypted again until it falls inside, which keeps it a bijection of ``[0, n)`` (Black &
Rogaway, 2002). Each round (:func:`rounds` of them) replaces ``(L, R)`` by
``(R, L ^ F(R ^ key_r))``, where ``F`` is Chris Wellons' ``lowbias32`` (xorshift-multiply)
hash on 32 bits truncated to its top ``k`` bits; the round keys are consecutive
``splitmix64`` outputs from the seed, and one more key bit decides whether values 0 and 1
of the domain are swapped after the last round. All arithmetic is on int64 tensors holding
values below ``2**32`` -- the multipliers are below ``2**31`` in magnitude, so no product
overflows and no right shift meets a negative number -- and the same seed gives the same
order on every device.

The order is a pseudo-random permutation, not a uniform draw among all ``n!``. A Feistel
network of ``k >= 2``-bit halves is an even permutation of its domain (Even & Goldreich),
and cycle walking from even permutations alone is biased for small ``n`` (54 % of the
orders of 5 values would be odd, 39 % of those of 8): the seeded swap makes odd
permutations of the domain as likely as even ones. Small domains mix slowly, so they get
more rounds; with them, orders of 5 to 64 values pass chi-square tests of uniformity over
300,000 seeds (all 120 and 720 orders of 5 and 6 values, each position's value, the first
two values). For shuffling the start nodes of random walks it behaves like
``torch.randperm``.

Example
-------
>>> from graphemb.sampling.permutation import RandomOrder
>>> order = RandomOrder(10, seed=7)
>>> whole = order.chunk(0, 10)
>>> sorted(whole.tolist()) == list(range(10))
True
>>> bool((torch.cat(list(order.chunks(4))) == whole).all())
True
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .._checks import as_size, is_integer_like
from ._kernels import compiled_on

__all__ = ["MAX_NODES", "RandomOrder", "rounds"]

#: Largest ``num_nodes``: halves of at most 31 bits keep every value and product in int64.
MAX_NODES = 2**62

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
# lowbias32's multipliers (0x7FEB352D, 0x846CA68B), both taken modulo 2**32: the second one
# as 0x846CA68B - 2**32, so that |x * c| < 2**63 for x < 2**32 (no int64 overflow).
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B - 2**32)
# Positions computed at once by chunks(). On CPU the compiled kernels compute them straight
# into the chunk's array (10M positions in 0.7 s). The pure-torch path amortizes the
# per-operation overhead of small chunks over a block, and stays below torch's grain size
# (32768), below which elementwise operations run on the calling thread: no parallel region,
# so no wait on threads that training keeps busy (measured on 2 loaded cores: with blocks of
# 2**17, 0.7 s for 10M positions on 1 thread but 8 to 50 s on 2). A block's half dozen
# temporaries (8 bytes a position) are freed into the C heap between blocks: 2**13 positions
# keep them to about 0.4 MiB (10M positions in 2.9 s, against 1.0 s and 1.5 MiB with 2**15).
_BLOCK = 1 << 13


def rounds(half_bits: int) -> int:
    """Feistel rounds on ``half_bits``-bit halves: 8 (four make a pseudo-random permutation,
    Luby & Rackoff), 12 on domains of at most 256 values (``half_bits <= 4``), where 8
    leave a bias that 300,000 seeds detect in the orders of 5 to 8 values."""
    return 12 if half_bits <= 4 else 8


class RandomOrder:
    """The seeded pseudo-random permutation of ``0 .. num_nodes - 1``, computed a chunk of
    positions at a time (see the module's docstring for the construction).

    Parameters
    ----------
    num_nodes : int
        ``n``, the number of values permuted; 0 <= n <= :data:`MAX_NODES`.
    seed : int
        Key of the permutation, in ``[0, 2**64)``: the same seed gives the same order on
        every run and device, different seeds independent-looking ones.
    device : torch.device or str
        Where :meth:`chunk`, :meth:`chunks` and :meth:`at` return their values.

    Examples
    --------
    >>> order = RandomOrder(6, seed=1)
    >>> first, rest = order.chunk(0, 2), order.chunk(2, 6)
    >>> sorted(torch.cat([first, rest]).tolist())
    [0, 1, 2, 3, 4, 5]
    >>> bool((order.at(torch.tensor([3, 4])) == rest[1:3]).all())
    True
    """

    def __init__(self, num_nodes: int, seed: int, device: torch.device | str = "cpu") -> None:
        num_nodes = as_size("num_nodes", num_nodes)
        if num_nodes > MAX_NODES:
            raise ValueError(f"num_nodes must be at most 2**62 = {MAX_NODES}, got {num_nodes}")
        if not is_integer_like(seed):
            raise TypeError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        seed = int(seed)  # type: ignore[call-overload]
        if not 0 <= seed <= _MASK64:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed}")
        self._num_nodes = num_nodes
        self._seed = seed
        self._device = torch.device(device)
        self._half_bits = max(1, -(-max(num_nodes - 1, 1).bit_length() // 2))
        keys = _round_keys(seed, rounds(self._half_bits) + 1)
        self._keys, self._odd = keys[:-1], bool(keys[-1] & 1)

    @property
    def num_nodes(self) -> int:
        """``n``: the order is a permutation of ``0 .. n - 1``."""
        return self._num_nodes

    @property
    def seed(self) -> int:
        """The key the order was built from."""
        return self._seed

    @property
    def device(self) -> torch.device:
        """Where the values are returned."""
        return self._device

    def __len__(self) -> int:
        return self._num_nodes

    def chunk(self, start: int, stop: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Positions ``start .. stop - 1`` of the order.

        Parameters
        ----------
        start, stop : int
            ``0 <= start <= stop <= num_nodes``.
        out : Tensor of int64, shape (stop - start,), optional
            On :attr:`device`, contiguous or strided (a column of a matrix, say): the values
            are written there (a buffer reused from chunk to chunk allocates nothing per
            chunk).

        Returns
        -------
        Tensor of int64, shape (stop - start,), on :attr:`device`
            Distinct values in ``[0, num_nodes)``; the chunks of a split of
            ``[0, num_nodes)`` concatenate to the whole order, every value once. ``out``
            when given.
        """
        start, stop = as_size("start", start), as_size("stop", stop)
        if not start <= stop <= self._num_nodes:
            raise ValueError(
                f"need 0 <= start <= stop <= num_nodes = {self._num_nodes}, "
                f"got start={start}, stop={stop}"
            )
        if out is not None:
            self._check_out(out, stop - start, exact=True)
        module = compiled_on(self._device, "random_order")
        if module is not None:
            # no temporaries: the same values, computed into the returned array
            return module.random_order(
                self._num_nodes,
                self._half_bits,
                self._keys,
                self._odd,
                start,
                stop - start,
                out,
            )
        positions = torch.arange(start, stop, dtype=torch.int64, device=self._device)
        values = self._permute(positions)
        return values if out is None else out.copy_(values)

    def chunks(self, size: int, *, out: torch.Tensor | None = None) -> Iterator[torch.Tensor]:
        """The whole order in consecutive chunks of ``size`` values (the last one shorter),
        like ``torch.randperm(num_nodes).split(size)``; a few chunks are computed at once,
        so memory stays O(max(size, 2**13)) (with ``out``, one chunk at a time into it).

        Parameters
        ----------
        size : int
            Values per chunk, >= 1.
        out : Tensor of int64, optional
            A vector on :attr:`device` (strided or not) of at least ``min(size, num_nodes)``
            entries: each chunk is then computed into its start and returned as a view of
            it, which the next chunk overwrites (nothing allocated per chunk).

        Yields
        ------
        Tensor of int64, shape (size,) (the last: ``num_nodes`` modulo ``size`` if not 0)
            The values at positions ``i * size .. (i + 1) * size - 1`` of the order.
        """
        size = as_size("size", size, minimum=1)
        if out is not None:
            self._check_out(out, min(size, self._num_nodes), exact=False)
            for begin in range(0, self._num_nodes, size):
                stop = min(begin + size, self._num_nodes)
                yield self.chunk(begin, stop, out=out[: stop - begin])
            return
        block = size * max(1, _BLOCK // size)
        for begin in range(0, self._num_nodes, block):
            yield from self.chunk(begin, min(begin + block, self._num_nodes)).split(size)

    def _check_out(self, out: torch.Tensor, count: int, *, exact: bool) -> None:
        """``out`` must be an int64 vector on the order's device of ``count`` distinct
        entries (at least ``count`` unless ``exact``): strided, but not broadcast."""
        fits = out.dim() == 1 and (out.numel() == count if exact else out.numel() >= count)
        device = self._device
        here = out.device.type == device.type and device.index in (None, out.device.index)
        distinct = out.dim() != 1 or out.numel() < 2 or out.stride(0) >= 1
        if not (fits and here and distinct and out.dtype == torch.int64):
            wanted = f"{count}" if exact else f"at least {count}"
            raise ValueError(
                f"out must be an int64 vector of {wanted} distinct entries on "
                f"{self._device}, got {out.dtype} of shape {tuple(out.shape)} (strides "
                f"{tuple(out.stride())}) on {out.device}"
            )

    def at(self, positions: torch.Tensor) -> torch.Tensor:
        """The values at ``positions`` of the order.

        Parameters
        ----------
        positions : Tensor of integers, any shape
            Each in ``[0, num_nodes)``; on any device.

        Returns
        -------
        Tensor of int64, the shape of ``positions``, on :attr:`device`
        """
        if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
            raise TypeError(f"positions must be a tensor of integers, got {positions!r}")
        if positions.dtype in (torch.bool, torch.complex64, torch.complex128):
            raise TypeError(f"positions must be a tensor of integers, got dtype {positions.dtype}")
        positions = positions.to(device=self._device, dtype=torch.int64)
        outside = (positions < 0) | (positions >= self._num_nodes)
        if bool(outside.any()):
            bad = int(positions[outside][0])
            raise ValueError(f"positions must lie in [0, num_nodes = {self._num_nodes}), got {bad}")
        return self._permute(positions.reshape(-1)).view(positions.shape)

    def _permute(self, positions: torch.Tensor) -> torch.Tensor:
        """The Feistel network restricted to ``[0, n)`` by cycle walking: values (P,) for
        ``positions`` (P,), int64 in ``[0, n)``."""
        values = self._encrypt(positions)
        outside = torch.nonzero(values >= self._num_nodes).squeeze(1)
        while outside.numel():  # each pass is a fresh encryption of the values left out
            again = self._encrypt(values.index_select(0, outside))
            values.index_copy_(0, outside, again)
            outside = outside[again >= self._num_nodes]
        return values

    def _encrypt(self, values: torch.Tensor) -> torch.Tensor:
        """One pass of the Feistel network over the domain ``[0, 4**k)``: a bijection of
        it, int64 (P,) -> int64 (P,)."""
        bits = self._half_bits
        left, right = values >> bits, values & ((1 << bits) - 1)
        for key in self._keys:
            left, right = right, _round_function(right, key, bits).bitwise_xor_(left)
        values = left.bitwise_left_shift_(bits).bitwise_or_(right)
        if self._odd:  # then swap 0 and 1: odd permutations of the domain as often as even
            values = torch.where(values < 2, values ^ 1, values)
        return values

    def __repr__(self) -> str:
        return f"RandomOrder(num_nodes={self._num_nodes}, seed={self._seed})"


def _round_function(half: torch.Tensor, key: int, bits: int) -> torch.Tensor:
    """``F(half ^ key)``: lowbias32 of the 32-bit word, its top ``bits`` bits; int64 (P,)
    in ``[0, 2**bits)`` for ``half`` int64 (P,) in ``[0, 2**bits)``."""
    first, second = _MULTIPLIERS
    if bits <= 16:  # the high half of half ^ key is key's: its first xorshift is key's too
        x = half ^ (key ^ (key >> 16))
    else:
        x = half ^ key  # below 2**32: half < 2**31, key < 2**32
        x.bitwise_xor_(x >> 16)
    x.mul_(first).bitwise_and_(_MASK32)
    x.bitwise_xor_(x >> 15).mul_(second).bitwise_and_(_MASK32)
    if bits > 16:  # the last xorshift changes only the low 16 bits
        x.bitwise_xor_(x >> 16)
    return x.bitwise_right_shift_(32 - bits)


def _round_keys(seed: int, count: int) -> list[int]:
    """``count`` 32-bit keys: the low halves of consecutive splitmix64 outputs from
    ``seed`` (Python integers, exact)."""
    keys = []
    state = seed
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        keys.append((z ^ (z >> 31)) & _MASK32)
    return keys
