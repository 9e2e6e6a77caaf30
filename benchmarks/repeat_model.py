"""Chapter 02's repeat experiment against its roofline model, point by point.

On the device in use (bl.device(): CUDA if present; BRRR_DEVICE=cpu for the
CPU), measure ``x = x * 2`` repeated 1, 2, 4 ... 128 times, eager and fused,
on the explorer's default size, and print for every point the measured time,
the model's time and their ratio, then the knee the fused line shows against
the one the ceilings predict. Run:

    python benchmarks/repeat_model.py [--size N] [--max-repeat R] [--threads T]

On a CPU shared with other programs, run with ``--threads 1``: a 2-thread op
whose second thread waits for a core another program holds takes whole
scheduler ticks (4 ms steps), a fact about the busy machine, not the model;
points measured that way are marked "waited". The ceilings are measured (and
cached) for the thread count in use, so the model follows it.

The model (``brrrlib.widgets._experiments.repeat_model_s``): every pass moves 8 bytes per element
at the copy bandwidth ceiling, the fused chain multiplies at the vector ceiling,
every kernel pays one op's overhead. Both modes write into outputs that already
exist, as the model assumes. The checks printed at the end: every point within
2x of the model, the measured knee within +-50% of the predicted one. They are
properties of a quiet machine, so they are measured and quoted here, not
asserted by the test suite.
"""

import argparse
import math

import torch

import brrrlib as bl
from brrrlib import _fmt, widgets
from brrrlib.widgets import _experiments


def measured_knee_repeat(result) -> float | None:
    """Where the measured fused line bends: its flat level over its compute-bound slope.

    The fused time follows ``max(flat, repeat x s)``. ``flat`` is the median of
    the measured points within 15% of the fastest; ``s`` is ``time / repeat``
    of the most compute-bound point, the largest repeat, once it takes more
    than twice ``flat`` (near the knee the bend is gradual, and a long chain
    multiplies a little slower than a short one). None until the sweep gets there.
    """
    pts = [p for p in result.line("fused") if p.measured]
    if not pts:
        return None
    fastest = min(p.median_s for p in pts)
    flat = _fmt.median([p.median_s for p in pts if p.median_s <= 1.15 * fastest])
    last = pts[-1]
    return flat / (last.median_s / last.x) if last.median_s > 2 * flat else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="elements (default: the explorer's)")
    parser.add_argument("--max-repeat", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    opts = parser.parse_args()
    if opts.threads is not None:
        torch.set_num_threads(opts.threads)

    dev = bl.device()
    c = bl.measure_ceilings(dev, progress=False)
    print(
        f"{c.device_name} ({dev}): vector {c.vector_flops_per_s / 1e9:.1f} GFLOP/s, "
        f"bandwidth {c.mem_bandwidth_bytes_per_s / 1e9:.1f} GB/s, "
        f"op overhead {c.op_overhead_s * 1e6:.2f} µs, {torch.get_num_threads()} CPU threads"
    )
    repeats = [2**k for k in range(int(math.log2(opts.max_repeat)) + 1)]
    result = widgets.repeat_sweep(
        opts.size, repeats, device=dev, ceilings=c, max_point_s=math.inf, progress=False
    )
    print(f"{result.title}\n")
    print(f"{'repeat':>6} {'mode':>6} {'measured':>10} {'model':>10} {'ratio':>6}")
    ratios = []
    for mode in ("eager", "fused"):
        for p in result.line(mode):
            ratios.append(p.model_ratio)
            flag = "" if 0.5 <= p.model_ratio <= 2 else "  <- outside 2x"
            flag += f"  (waited: CPU share {p.cpu_share:.0%})" if p.waited else ""
            print(
                f"{p.x:>6} {mode:>6} {p.median_s * 1e3:>8.3f}ms {p.predicted_s * 1e3:>8.3f}ms "
                f"{p.model_ratio:>6.2f}{flag}"
            )
    predicted = _experiments.predicted_knee_repeat(c)
    measured = measured_knee_repeat(result)
    print(f"\nknee: predicted {predicted:.1f}, measured ", end="")
    print("not reached (raise --max-repeat)" if measured is None else f"{measured:.1f}")
    inside = sum(0.5 <= r <= 2 for r in ratios)
    print(
        f"points within 2x of the model: {inside} of {len(ratios)} "
        f"(ratios {min(ratios):.2f} to {max(ratios):.2f})"
    )
    if measured is not None:
        off = measured / predicted - 1
        print(
            f"measured knee / predicted: {measured / predicted:.2f} ({off:+.0%}; within ±50%: "
            f"{'yes' if abs(off) <= 0.5 else 'no'})"
        )


if __name__ == "__main__":
    main()
