"""bl.benchmark against torch.utils.benchmark.Timer on the same CPU workloads.

Prints both medians and their ratio for ops from ~1 µs to ~50 ms. Run:

    python benchmarks/timer_agreement.py [--threads N] [--rounds R]

Both timers run interleaved, round by round, with the same number of threads
(one by default: on a busy 2-core machine, an OpenMP barrier waiting for a
descheduled thread adds whole scheduler ticks at random, which is noise about
the machine, not about the timers). The median over rounds is compared.
"""

import argparse
import statistics

import torch
from torch.utils.benchmark import Timer

import brrrlib as bl


def workloads():
    a = {n: (torch.randn(n, n), torch.randn(n, n)) for n in (128, 512, 1280)}
    return {
        "add, 1 element": (torch.add, (torch.ones(1), torch.ones(1))),
        "add, 64Ki elements": (torch.add, (torch.ones(1 << 16), torch.ones(1 << 16))),
        "relu, 4Mi elements": (torch.relu, (torch.randn(1 << 22),)),
        "mm 128": (torch.mm, a[128]),
        "mm 512": (torch.mm, a[512]),
        "mm 1280": (torch.mm, a[1280]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    print(f"torch {torch.__version__}, {opts.threads} thread(s), {opts.rounds} interleaved rounds")
    print(f"{'workload':<22}{'bl.benchmark':>14}{'Timer':>14}{'ratio':>8}  bl spread")
    for name, (fn, args) in workloads().items():
        timer = Timer("fn(*args)", globals={"fn": fn, "args": args}, num_threads=opts.threads)
        ours, theirs, last = [], [], None
        for _ in range(opts.rounds):
            last = bl.benchmark(fn, *args)
            ours.append(last.median_s)
            theirs.append(timer.blocked_autorange(min_run_time=0.2).median)
        o, t = statistics.median(ours), statistics.median(theirs)
        spread = f"IQR {last.relative_iqr:.0%}, {len(last.samples_s)} x {last.calls_per_sample}"
        print(f"{name:<22}{o * 1e6:>11.2f} µs{t * 1e6:>11.2f} µs{o / t:>8.3f}  {spread}")


if __name__ == "__main__":
    main()
