"""Are bl.measure_ceilings' numbers this device's real ceilings?

Sets each measured ceiling beside the best the same device does by other means in the
same run, on the device in use (bl.device(); BRRR_DEVICE=cpu for the CPU of a GPU
machine; ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 for a laptop's AVX2 kernels):

* matmul, per precision: the best of ``torch.mm``, ``F.linear`` (and oneDNN's linear on
  a CPU) at a few square sizes, timed longer (triton's ``do_bench`` on CUDA when triton is installed).
* vector: the fused multiply chain at lengths 16-128 (the ceiling takes the best of
  16, 32 and 64).
* special functions: each one again through the ops the ceiling screens, timed longer.
* bandwidth: the best of a 4x larger ``copy_`` (CUDA: 1 GiB), a same-size ``copy_``
  and numpy's ``copyto`` on a CPU; and a copy into a *fresh* tensor (page faults on a
  CPU: why the ceiling preallocates).
* each access pattern (read, copy, update: ``Ceilings.bandwidth_for``): its roof against
  a same-run pass of that pattern on as many bytes, in spaced rounds like the ceiling's
  (five rounds of each pattern in turn, the best round: STREAM's best-of-N).
* overhead: the ceiling is a floor, so the same ``a.add_(b)`` measured again, and every
  other tiny-op form, must cost at least as much: ``a + b``, ``torch.add(a, b, out=c)``.

"ratio" is reference / ceiling: for a ceiling, near 1 means it is what the hardware does
and above 1 that it is low; for the overhead floor every ratio should be >= ~1. On a GPU
of the spec table each ceiling is also set beside the sheet's peak, what the chip's parts
allow (SMs x lanes x clock; the vector peak counts one multiply per lane per cycle, half
the sheet's fp32 figure, which counts a fused multiply-add as two): a ceiling above it is
a measurement bug. On a CPU the peak is its parts' (``bl.parts``) at the reported clock: a
virtual machine reports its nominal clock, so a few percent above it is turbo. Run: ``python benchmarks/ceilings.py [--refresh] [--json PATH]``
(about 30-60 s on 2 CPU cores, ~20 s on a GPU); ``--json`` writes the rows as data.
"""

import argparse
import functools
import json
import statistics

import torch

import brrrlib as bl
from brrrlib import _fmt, ceilings, hardware, parts

#: The rows as data, for ``--json``: what, reference, ceiling, unit, the sheet's peak.
ROWS: list[dict] = []


def _timer(dev):
    """bl.benchmark's median, or do_bench's (device time, L2 flushed) on CUDA with triton."""
    if dev.type == "cuda":
        try:
            from triton.testing import do_bench

            return lambda fn: do_bench(fn, warmup=100, rep=500) / 1e3
        except ImportError:
            pass
    return lambda fn: bl.benchmark(fn, budget_s=1.0, device=dev).median_s


def row(what, reference, ceiling, fmt, unit="", peak=None):
    sheet = f"{ceiling / peak:>10.0%}" if peak else ""
    print(f"  {what:<52}{fmt(reference):>14}{reference / ceiling:>9.2f}{sheet}")
    ROWS.append(
        {"what": what, "reference": reference, "ceiling": ceiling, "unit": unit, "peak": peak}
    )


def sheet_peaks(c, dev) -> dict:
    """The peaks the chip's parts allow, by ceiling: a GPU's spec sheet, a CPU's
    cores x FMA units x lanes x 2 x its reported clock (``bl.parts``; turbo can beat it)."""
    cpu = parts.cpu_parts(c.num_threads) if dev.type == "cpu" else None
    if cpu is not None and cpu.peak_flops_per_s:
        return {"matmul fp32": cpu.peak_flops_per_s, "vector": cpu.peak_flops_per_s / 2}
    spec = hardware.spec_for_device_name(c.device_name) if dev.type == "cuda" else None
    if spec is None:
        return {}
    peaks = {f"matmul {k}": v for k, v in spec.peak_flops_per_s.items()}
    peaks["vector"] = spec.peak("fp32") / 2  # one multiply per lane per cycle; an FMA is two
    peaks["bandwidth"] = spec.mem_bandwidth_bytes_per_s
    return peaks


def matmul(c, dev, time_it, peaks):
    sizes = (512, 1024, 2048) if dev.type == "cpu" else (4096, 8192, 16384)
    for key, peak in c.matmul_flops_per_s_by_dtype.items():

        def best_kernel(key=key):  # the kernels the ceiling screens, at each size: the fastest
            found = (0.0, "")
            for n in sizes:
                if not c.fast_path(key) and n > sizes[0]:
                    break  # no fast path here: a slow path is slow at any size
                kernels = ceilings._matmul_kernels(n, ceilings._DTYPES[key], dev)
                for name, call in kernels.items():
                    found = max(found, (2 * n**3 / time_it(call), f"{name}, n={n}"))
            return found

        mode = "high" if key == "tf32" else "highest"
        best, best_at = ceilings._in_precision(mode, best_kernel)
        row(
            f"matmul {key}: best kernel, timed longer ({best_at})",
            best,
            peak,
            lambda x: _fmt.si(x, "FLOP/s"),
            "FLOP/s",
            peaks.get(f"matmul {key}"),
        )


def vector(c, dev, time_it, peaks):
    numel = 2**17 * torch.get_num_threads() if dev.type == "cpu" else 2**24
    x = torch.rand(numel, device=dev) + 1.0
    rates = {}
    for steps in (16, 32, 64, 128):
        fn = torch.compile(functools.partial(ceilings._multiply_chain, steps=steps), dynamic=False)
        rates[steps] = numel * steps / time_it(functools.partial(fn, x))
    best = max(rates, key=rates.get)
    row(
        f"vector: best multiply chain (length {best})",
        rates[best],
        c.vector_flops_per_s,
        lambda v: _fmt.si(v, "FLOP/s"),
        "FLOP/s",
        peaks.get("vector"),
    )
    print(
        "    by chain length: "
        + ", ".join(f"{k}: {_fmt.si(v, 'FLOP/s')}" for k, v in rates.items())
    )


def special(c, dev):
    # the ceiling's size and timer: in cache, as the ceiling is (do_bench flushes the L2,
    # which made an H100's reference half the ceiling: HBM, not the special-function units)
    numel = (
        2**18 * torch.get_num_threads()
        if dev.type == "cpu"
        else bl.machine.last_level_cache_bytes(dev) // 16
    )
    x = torch.rand(numel, device=dev) + 0.5
    out = torch.empty_like(x)
    time_it = lambda fn: bl.benchmark(fn, budget_s=1.0, device=dev).median_s  # noqa: E731
    for name, rate in c.special_per_s.items():  # the same ops the ceiling screens, the best
        ops = ceilings._SPECIAL_OPS[name]
        times = {label: time_it(functools.partial(op, x, out=out)) for label, op in ops}
        label = min(times, key=times.get)
        row(
            f"special: {name}, timed longer ({label})",
            numel / times[label],
            rate,
            lambda v: _fmt.si(v, "/s"),
            "/s",
        )


def bandwidth(c, dev, time_it, peaks):
    fmt = lambda v: _fmt.si(v, "B/s")  # noqa: E731
    best, what = 0.0, ""
    for nbytes in (c.copy_bytes, 2**30 if dev.type == "cuda" else 4 * c.copy_bytes):
        src = torch.ones(nbytes // 4, device=dev)
        dst = torch.zeros_like(src)
        rate = 2 * nbytes / time_it(functools.partial(dst.copy_, src))
        if rate > best:
            best, what = rate, f"copy_ of {_fmt.binary_bytes(nbytes)}"
        del src, dst
    small = torch.ones(c.copy_bytes // 4, device=dev)
    if dev.type == "cpu":
        import numpy as np

        a, b = small.numpy(), np.zeros(small.numel(), np.float32)
        rate = 2 * c.copy_bytes / time_it(functools.partial(np.copyto, b, a))
        if rate > best:
            best, what = rate, "np.copyto"
    peak = peaks.get("bandwidth")
    row(f"best same-run copy ({what})", best, c.bandwidth_for("copy"), fmt, "B/s", peak)
    phases = c.bandwidth_rounds_bytes_per_s
    if phases:
        print(f"    the ceiling's rounds: {', '.join(fmt(v) for v in phases)}")
    row(
        "torch.clone: a fresh output each call",
        2 * c.copy_bytes / time_it(functools.partial(torch.clone, small)),
        c.mem_bandwidth_bytes_per_s,
        fmt,
        "B/s",
    )
    # each access pattern's roof against a same-run pass of that pattern, as many bytes, in
    # spaced rounds as the ceiling's are (each pattern in turn, five times; the best round)
    out = torch.zeros_like(small)
    halves = small.chunk(2)
    passes = {
        "read": (
            "x.sum() or a dot of its halves",
            (small.sum, functools.partial(torch.dot, *halves)),
            c.copy_bytes,
        ),
        "copy": ("out.copy_(x)", (functools.partial(out.copy_, small),), 2 * c.copy_bytes),
        "update": ("x.mul_(1.0)", (functools.partial(small.mul_, 1.0),), 2 * c.copy_bytes),
    }
    best = dict.fromkeys(passes, 0.0)
    for _ in range(5):
        for pattern, (_, kernels, moved) in passes.items():
            for fn in kernels:
                rate = moved / bl.benchmark(fn, budget_s=0.1, device=dev).median_s
                best[pattern] = max(best[pattern], rate)
    for pattern, (what, _, _) in passes.items():
        row(f"{pattern} roof: same-run {what}", best[pattern], c.bandwidth_for(pattern), fmt, "B/s")


def overhead(c, dev):
    a, b, out = (torch.ones(1, device=dev) for _ in range(3))
    forms = {
        "a.add_(b) (the ceiling's form)": functools.partial(a.add_, b),
        "torch.add(a, b, out=c)": functools.partial(torch.add, a, b, out=out),
        "a + b (allocates its output)": lambda: a + b,
    }
    for name, fn in forms.items():
        seconds = statistics.median(
            bl.benchmark(fn, budget_s=0.3, device=dev).median_s for _ in range(3)
        )
        row(name, seconds, c.op_overhead_s, _fmt.seconds, "s")
    print("    a floor: every ratio here should be >= ~1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="measure the ceilings again")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH")
    opts = parser.parse_args()
    dev = bl.machine.physical(bl.device())
    c = bl.measure_ceilings(dev, refresh=opts.refresh)
    print(c)
    time_it = _timer(dev)
    print(f"\n{c.device_name} ({dev}), torch {torch.__version__}")
    peaks = sheet_peaks(c, dev)
    print(f"  {'reference':<52}{'value':>14}{'ratio':>9}" + ("  ceil/peak" if peaks else ""))
    matmul(c, dev, time_it, peaks)
    vector(c, dev, time_it, peaks)
    special(c, dev)
    bandwidth(c, dev, time_it, peaks)
    overhead(c, dev)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(ROWS, f, indent=1)


if __name__ == "__main__":
    main()
