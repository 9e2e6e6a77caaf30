"""Hand-made stand-ins for measured results, shared by the test files.

Nothing here measures: tests that check arithmetic or rendering build a
``Ceilings`` with round numbers instead of calling ``bl.measure_ceilings()``.
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
