"""bl.benchmark against torch.utils.benchmark (and triton's do_bench on CUDA).

Prints each reference's median, bl.benchmark's, and their ratio, for ops from
~1 µs to ~50 ms on the device in use (bl.device(): CUDA if present; set
BRRR_DEVICE=cpu to time the CPU). Run:

    python benchmarks/timer_agreement.py [--threads N] [--rounds R]

The timers run interleaved, round by round, alternating which goes first,
and the median over rounds is compared. Nine rounds by default: on a shared 2-core VM a memory-bound op
(the relu) drifts by up to 10% from one 0.2 s round to the next, whichever
timer runs, so three rounds' medians read it 3-9% apart and nine 2-5%.
On the CPU both use the same number of threads (one by default: on
a busy 2-core machine an OpenMP barrier waiting for a descheduled thread adds
whole scheduler ticks at random, noise about the machine, not the timers).
On CUDA, do_bench times the device alone (events, L2 flushed before each
call) while bl.benchmark and Timer time back-to-back calls: for tiny ops
Python's launch cost shows in theirs and not in do_bench's, which is the
point of chapter 03, not a disagreement.

Agreement is a statistical property of a quiet machine, so it is measured
here and quoted in notes, not asserted by the test suite.
"""

import argparse
import statistics

import torch
from torch.utils.benchmark import Timer

import brrrlib as bl


def workloads(dev: torch.device) -> dict:
    """From a ~1 µs op to a ~50 ms one on a 2-core CPU; larger on a GPU."""
    big = dev.type != "cpu"
    sizes = (512, 4096, 8192) if big else (128, 512, 1280)
    mats = {n: (torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)) for n in sizes}
    numel = 1 << (26 if big else 22)
    return {
        "add, 1 element": (torch.add, (torch.ones(1, device=dev), torch.ones(1, device=dev))),
        "add, 64Ki elements": (
            torch.add,
            (torch.ones(1 << 16, device=dev), torch.ones(1 << 16, device=dev)),
        ),
        f"relu, {numel >> 20}Mi elements": (torch.relu, (torch.randn(numel, device=dev),)),
        **{f"mm {n}": (torch.mm, mats[n]) for n in sizes},
    }


def _do_bench():
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return do_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    opts = parser.parse_args()
    dev = bl.device()
    torch.set_num_threads(opts.threads)
    do_bench = _do_bench() if dev.type == "cuda" else None
    name = bl.machine.device_name(dev)
    print(
        f"{name} ({dev}), torch {torch.__version__}, {opts.threads} CPU thread(s), "
        f"{opts.rounds} interleaved rounds"
    )
    head = f"{'workload':<22}{'bl.benchmark':>14}{'Timer':>12}{'bl/Timer':>10}"
    if do_bench is not None:
        head += f"{'do_bench':>12}{'bl/do_bench':>13}"
    print(head + "  bl spread")
    for label, (fn, args) in workloads(dev).items():
        timer = Timer("fn(*args)", globals={"fn": fn, "args": args}, num_threads=opts.threads)
        ours, theirs, dobench, last = [], [], [], None
        for i in range(opts.rounds):
            # alternate which timer goes first (A B, B A, ...): a drift within a round, or a
            # first-in-the-round effect, then falls on both alike instead of on one
            for ours_first in (i % 2 == 0, i % 2 == 1):
                if ours_first:
                    last = bl.benchmark(fn, *args)
                    ours.append(last.median_s)
                else:
                    theirs.append(timer.blocked_autorange(min_run_time=0.2).median)
            if do_bench is not None:
                dobench.append(do_bench(lambda fn=fn, args=args: fn(*args)) / 1e3)
        o, t = statistics.median(ours), statistics.median(theirs)
        row = f"{label:<22}{o * 1e6:>11.2f} µs{t * 1e6:>9.2f} µs{o / t:>10.3f}"
        if dobench:
            d = statistics.median(dobench)
            row += f"{d * 1e6:>9.2f} µs{o / d:>13.3f}"
        spread = f"IQR {last.relative_iqr:.0%}, {len(last.samples_s)} x {last.calls_per_sample}"
        print(f"{row}  {spread}, {last.dropped} dropped", flush=True)


if __name__ == "__main__":
    main()
