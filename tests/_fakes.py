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


def disturbed(ceilings: Ceilings) -> str:
    """What makes measured ceilings unfit to be floors for fp32 work ("" if nothing).

    Ceilings measured while other programs held the cores (the fp32 rounds did not
    agree, or the process got under 80% of its CPU time) read low by an unknown
    factor, so no floor made from them is a floor, and no verdict drawn from them
    is a test of the verdict: tests that need them skip, saying why.
    """
    from brrrlib.ceilings import MIN_CPU_SHARE, SPREAD_LIMIT

    spread = {
        k: v for k, v in ceilings.spread.items() if k in ("matmul", "vector", "memory", "overhead")
    }
    says = [f"{k} varied {v:.0%} between rounds" for k, v in spread.items() if v > SPREAD_LIMIT]
    if ceilings.cpu_share < MIN_CPU_SHARE:
        says.append(f"this process got {ceilings.cpu_share:.0%} of its CPU time")
    return "; ".join(says)
