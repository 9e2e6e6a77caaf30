"""Are bl.measure_ceilings' numbers the machine's real ceilings?

Sets each measured ceiling beside the best this machine does by other means:

* matmul: a larger, longer torch.mm run; numpy's BLAS; and the theoretical
  SIMD peak = cores x GHz x SIMD lanes x 2 FMA pipes x 2 FLOPs, from
  /proc/cpuinfo (the clock there is nominal; turbo can exceed it).
* vector: the same theoretical peak, and what one eager in-cache op gets.
* bandwidth: numpy's ``np.copyto`` into a preallocated array, a 4x larger
  torch copy, and a copy into a *fresh* tensor (page faults: why the ceiling
  preallocates).
* overhead: ``a + b`` (operator) and ``torch.add(a, b, out=c)``.

Run: ``python benchmarks/ceilings.py [--refresh]`` (about 30-60 s on 2 cores).
"""

import argparse
import os
import platform
import re
from pathlib import Path

import numpy as np
import torch

import brrrlib as bl
from brrrlib.devices import _fmt_bytes_per_s as fmt_b
from brrrlib.devices import _fmt_flops as fmt_f
from brrrlib.timing import _format_seconds as fmt_s


def cpu_theoretical_flops_per_s():
    """cores x GHz x fp32 SIMD lanes x FMA pipes x 2, with the assumptions spelled out."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = (
        set(re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split())
        if "flags" in info
        else set()
    )
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", info, re.M)]
    if not mhz:
        return None, "no /proc/cpuinfo clock: cannot compute"
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    fma = "fma" in flags or "avx512f" in flags
    cores = os.cpu_count() or 1
    ghz = max(mhz) / 1e3
    peak = cores * ghz * 1e9 * lanes * 2 * (2 if fma else 1)
    why = (
        f"{cores} cores x {ghz:.2f} GHz (nominal) x {lanes} fp32 lanes x 2 pipes x "
        f"{'2 (FMA)' if fma else '1'}; assumes 2 full-width FMA pipes per core"
    )
    return peak, why


def row(what, value, ceiling, fmt, note=""):
    ratio = f"{value / ceiling:6.2f}x" if ceiling else ""
    print(f"  {what:<46}{fmt(value):>14}  {ratio}  {note}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="measure the ceilings again")
    opts = parser.parse_args()
    c = bl.measure_ceilings(refresh=opts.refresh)
    print(c)
    if c.device == "cpu":
        print(f"(CPU share during the matmul: {c.cpu_share:.0%} of {c.num_threads} threads' time)")
    print(
        f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, numpy {np.__version__}"
    )
    print(f"{'':<48}{'value':>14}  ratio to the ceiling")

    # ---- matmul
    print(f"\nmatmul fp32: ceiling {fmt_f(c.matmul_flops_per_s)} (n={c.matmul_size})")
    n = 2 * c.matmul_size
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    t = bl.benchmark(torch.mm, a, b, out=out, budget_s=3.0)
    row(
        f"torch.mm n={n}, 3 s budget (fastest)",
        2 * n**3 / t.min_s,
        c.matmul_flops_per_s,
        fmt_f,
    )
    m = c.matmul_size
    an, bn = np.random.rand(m, m).astype(np.float32), np.random.rand(m, m).astype(np.float32)
    outn = np.empty((m, m), np.float32)
    t = bl.benchmark(np.matmul, an, bn, out=outn, budget_s=1.5)
    row(
        f"numpy.matmul n={m} ({np.show_config.__module__.split('.')[0]} BLAS)",
        2 * m**3 / t.min_s,
        c.matmul_flops_per_s,
        fmt_f,
    )
    peak, why = cpu_theoretical_flops_per_s()
    if peak:
        row("theoretical SIMD peak", peak, c.matmul_flops_per_s, fmt_f)
        print(f"    ({why})")
        print(f"    measured matmul = {c.matmul_flops_per_s / peak:.0%} of the theoretical peak")

    # ---- vector
    print(f"\nvector fp32: ceiling {fmt_f(c.vector_flops_per_s)} ({c.vector_method})")
    if peak:
        row("theoretical SIMD peak", peak, c.vector_flops_per_s, fmt_f)
        print(f"    measured vector = {c.vector_flops_per_s / peak:.0%} of the theoretical peak")
    k = 1 << 16
    x, y, z, o = (torch.rand(k) for _ in range(4))
    t = bl.benchmark(torch.addcmul, x, y, z, out=o)
    row(
        "eager torch.addcmul, 256 KiB in cache",
        2 * k / t.min_s,
        c.vector_flops_per_s,
        fmt_f,
        "(1 op: load/store + dispatch bound)",
    )
    row(
        "matmul ceiling (same SIMD units on a CPU)",
        c.matmul_flops_per_s,
        c.vector_flops_per_s,
        fmt_f,
    )

    # ---- bandwidth
    nbytes = c.copy_bytes
    print(
        f"\nmemory bandwidth: ceiling {fmt_b(c.mem_bandwidth_bytes_per_s)} (copy of {nbytes >> 20} MiB, read + write)"
    )
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)
    t = bl.benchmark(np.copyto, dst, src, budget_s=1.5)
    row(
        "np.copyto into preallocated (1 thread)",
        2 * nbytes / t.min_s,
        c.mem_bandwidth_bytes_per_s,
        fmt_b,
    )
    big = torch.ones(nbytes)  # 4x the bytes
    bigdst = torch.zeros_like(big)
    t = bl.benchmark(bigdst.copy_, big, budget_s=1.5)
    row(
        f"torch copy_ of {4 * nbytes >> 20} MiB",
        2 * 4 * nbytes / t.min_s,
        c.mem_bandwidth_bytes_per_s,
        fmt_b,
    )
    del big, bigdst
    s = torch.ones(nbytes // 4)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    d = torch.zeros_like(s)
    t = bl.benchmark(d.copy_, s, budget_s=1.0)
    torch.set_num_threads(threads)
    row("torch copy_, 1 thread", 2 * nbytes / t.min_s, c.mem_bandwidth_bytes_per_s, fmt_b)
    t = bl.benchmark(torch.clone, s, budget_s=1.0)
    row(
        "torch.clone (fresh output each call)",
        2 * nbytes / t.min_s,
        c.mem_bandwidth_bytes_per_s,
        fmt_b,
        "(allocation + page faults)",
    )

    # ---- overhead
    print(f"\nop overhead: ceiling {fmt_s(c.op_overhead_s)} (torch.add on 1 element, median)")
    a1, b1, o1 = torch.ones(1), torch.ones(1), torch.empty(1)
    t = bl.benchmark(lambda: a1 + b1)
    row("a + b via the operator, in a lambda", t.median_s, c.op_overhead_s, fmt_s)
    t = bl.benchmark(torch.add, a1, b1, out=o1)
    row("torch.add(a, b, out=c): no allocation", t.median_s, c.op_overhead_s, fmt_s)
    t = bl.benchmark(lambda: None)
    row("an empty Python call (the floor)", t.median_s, c.op_overhead_s, fmt_s)


if __name__ == "__main__":
    main()
