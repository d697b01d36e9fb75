"""The allocator settings of a run, chosen explicitly and the same for every contender.

Two environment variables change how fast every library's CPU code runs here, so a run
sets them once, before its first tensor, and every contender sees the same values:

``THP_MEM_ALLOC_ENABLE``
    torch's CPU allocator asks for transparent huge pages under every allocation of 2 MiB
    or more (torch reads it at its first CPU allocation). graphemb turns it on when it is
    imported unless it is set (:mod:`graphemb._allocator`); DGL and torch alone leave it off.
``OMP_WAIT_POLICY``
    whether idle OpenMP threads (torch's, DGL's) spin or sleep between parallel regions;
    unset, each runtime uses its own default.

Nothing here runs at import: a benchmark calls :func:`apply` (through
:func:`harness.cli.apply_allocator`) right after parsing its options. Contenders in
processes of their own (:mod:`harness.isolated`) inherit the environment, hence the same
settings.
"""

from __future__ import annotations

import os

HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"
WAIT_POLICY = "OMP_WAIT_POLICY"
SETTINGS = (HUGE_PAGES, WAIT_POLICY)


def apply(huge_pages: str | None = None, omp_wait_policy: str | None = None) -> dict:
    """Set the run's allocator settings in this process's environment.

    Parameters
    ----------
    huge_pages : {"on", "off"} or None
        torch's huge-page CPU allocations for every contender. ``None``: the value already
        in the environment, else ``"on"`` (the setting graphemb's users get by default).
    omp_wait_policy : {"active", "passive"} or None
        How idle OpenMP threads wait. ``None``: leave the variable as it is (unset: each
        OpenMP runtime's default).

    Returns
    -------
    dict
        :func:`current`: the settings now in effect.
    """
    if huge_pages is None:
        huge_pages = "off" if os.environ.get(HUGE_PAGES) == "0" else "on"
    if huge_pages not in ("on", "off"):
        raise ValueError(f"huge_pages must be 'on' or 'off', got {huge_pages!r}")
    os.environ[HUGE_PAGES] = "1" if huge_pages == "on" else "0"
    if omp_wait_policy is not None:
        if omp_wait_policy.lower() not in ("active", "passive"):
            raise ValueError(
                f"omp_wait_policy must be 'active' or 'passive', got {omp_wait_policy!r}"
            )
        os.environ[WAIT_POLICY] = omp_wait_policy.upper()
    return current()


def current() -> dict:
    """The settings in this process's environment (``None`` for an unset variable)."""
    return {name: os.environ.get(name) for name in SETTINGS}


def describe(settings: dict | None = None) -> str:
    """One line for a header: ``"THP_MEM_ALLOC_ENABLE=1, OMP_WAIT_POLICY unset"``."""
    settings = current() if settings is None else settings
    return ", ".join(
        f"{name}={value}" if value is not None else f"{name} unset"
        for name, value in settings.items()
    )
