"""Hand-made stand-ins for measured results, shared by the test files.

Nothing here measures: tests that check arithmetic or rendering build a
``Ceilings`` with round numbers instead of calling ``bl.measure_ceilings()``.
:func:`disturbed` says when measured ceilings cannot serve as floors.
"""

from brrrlib.ceilings import Ceilings


def fake_ceilings(**overrides) -> Ceilings:
    """A plausible 2-core CPU's ceilings; keyword arguments replace any field."""
    values = dict(
        device="cpu",
        device_name="Test CPU",
        matmul_flops_per_s=200e9,
        vector_flops_per_s=150e9,
        mem_bandwidth_bytes_per_s=20e9,
        op_overhead_s=1e-6,
        measured_at="2026-01-01T00:00:00+00:00",
        spread={"matmul": 0.01},
    )
    values.update(overrides)
    return Ceilings(**values)


def disturbed(ceilings: Ceilings, regime: str | None = None) -> str:
    """What makes measured ceilings unfit to test a verdict of ``regime`` ("" if nothing).

    A ceiling read while other programs held the cores reads low, which makes
    its regime's floor read high. So what can spoil a verdict of ``regime``
    is a disturbed ceiling of *another* regime, or calls that waited for cores
    (every ceiling low by an unknown factor): both are ``noise_notes``. Only the
    compute ceilings can read low unnoticed: the bandwidth is the fastest of
    its rounds and the op overhead the cheapest, so their rounds disagreeing
    (a shared machine's phases) leaves them a ceiling and a floor.
    """
    return "; ".join(ceilings.noise_notes(() if regime == "compute" else ("matmul", "vector")))


def measured_for_verdicts() -> Ceilings:
    """This CPU's ceilings for verdict tests: measured, and measured once more if disturbed.

    A verdict test skips only when both measurements were disturbed in a way
    that spoils its floors (:func:`disturbed`); the less disturbed is kept.
    """
    import brrrlib as bl

    first = bl.measure_ceilings("cpu", progress=False)
    if not disturbed(first):
        return first
    second = bl.measure_ceilings("cpu", refresh=True, progress=False)
    return min((first, second), key=lambda c: (bool(disturbed(c)), -c.cpu_share))


def require(reason: str | None, what: str) -> None:
    """A live test's prerequisite: nothing if ``reason`` is None; else fail in CI (it must run
    there) and skip elsewhere, saying why."""
    import os

    import pytest

    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)
