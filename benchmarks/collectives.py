"""distributed.all_reduce_sweep against a plain nccl-tests-style loop, and against itself under torchrun.

Three ways to time the same all-reduces, in alternating rounds:

* **local**: ``distributed.all_reduce_sweep`` (the library starts the processes;
  blocks of calls between barriers, rounds over sizes, slowest rank, median);
* **torchrun**: the same benchmark as a module, ``torchrun --standalone
  --nproc-per-node=N -m brrrlib.distributed all-reduce``;
* **reference**: the method of nccl-tests' ``all_reduce_perf``, written out in a
  few lines under torchrun: warm up, barrier, time ``iters`` back-to-back
  all-reduces, report the average (rank 0's clock), no rounds, no blocks.

The table gives each size's median over rounds for every method, and the
ratios local / reference and torchrun / local (near 1: they agree). The fits'
alpha and beta are given per round, so their spread shows too. With CUDA and
``NCCL_TESTS_DIR`` pointing at a build of nccl-tests, ``all_reduce_perf`` runs
as well and its busbw is printed beside the library's.

Agreement is a statistical property of a quiet machine: it is measured here and
quoted in notes, not asserted by the test suite. Run (about 1-2 minutes on 2 CPU
cores)::

    python benchmarks/collectives.py [--world-size 2] [--rounds 3] [--sizes 4,64K,1M,16M]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from brrrlib import _fmt, distributed

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))

# The reference: nccl-tests' timing loop (src/common.cu: warm-up iterations, then
# `iters` operations between two timestamps, time / iters), in torch.distributed.
REFERENCE = """
import json, sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
dev = torch.device("cuda", dist.get_rank() % max(1, torch.cuda.device_count())) \\
    if torch.cuda.is_available() else torch.device("cpu")
sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
torch.set_num_threads(int(sys.argv[2]))
out = {}
for n in json.loads(sys.argv[1]):
    x = torch.zeros(n // 4, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    iters = 200 if n < 2**20 else 20
    dist.barrier(); sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    sync()
    out[n] = (time.perf_counter() - t0) / iters
if dist.get_rank() == 0:
    print(json.dumps(out))
dist.destroy_process_group()
"""


def _size(text: str) -> int:
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def local(sizes, world):
    sweep = distributed.all_reduce_sweep(sizes, world_size=world, budget_s=2.0)
    return dict(zip(sweep.sizes_bytes, sweep.median_s, strict=True)), sweep.fit


def under_torchrun(sizes, world):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ar.json"
        cmd = [
            TORCHRUN,
            "--standalone",
            f"--nproc-per-node={world}",
            "-m",
            "brrrlib.distributed",
            "all-reduce",
            "--sizes",
            ",".join(map(str, sizes)),
            "--out",
            str(out),
        ]
        subprocess.run(cmd, check=True, capture_output=True, cwd=tmp, timeout=600)
        sweep = distributed.load(out)
    return dict(zip(sweep.sizes_bytes, sweep.median_s, strict=True)), sweep.fit


def reference(sizes, world):
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "reference.py"
        script.write_text(REFERENCE)
        threads = str(max(1, (os.cpu_count() or 1) // world))
        cmd = [
            TORCHRUN,
            "--standalone",
            f"--nproc-per-node={world}",
            str(script),
            json.dumps(sizes),
            threads,
        ]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp, timeout=600)
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def nccl_tests(world):
    """all_reduce_perf's output, when CUDA and a build of nccl-tests are there."""
    folder = os.environ.get("NCCL_TESTS_DIR")
    binary = Path(folder or ".") / "build" / "all_reduce_perf"
    if not folder or not binary.exists() or not shutil.which("nvidia-smi"):
        return None
    cmd = [str(binary), "-b", "8", "-e", "32M", "-f", "4", "-g", str(world)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="4,1K,64K,1M,16M")
    opts = parser.parse_args()
    sizes = sorted({4 * -(-_size(s) // 4) for s in opts.sizes.split(",")})
    results = {"local": [], "torchrun": [], "reference": []}
    fits = {"local": [], "torchrun": []}
    for r in range(opts.rounds):
        order = (
            ("local", "torchrun", "reference") if r % 2 == 0 else ("reference", "torchrun", "local")
        )
        for method in order:
            print(f"round {r + 1}/{opts.rounds}: {method}", file=sys.stderr, flush=True)
            if method == "reference":
                results[method].append(reference(sizes, opts.world_size))
            else:
                times, fit = (local if method == "local" else under_torchrun)(
                    sizes, opts.world_size
                )
                results[method].append(times)
                fits[method].append(fit)
    med = {
        m: {n: statistics.median(run[n] for run in runs) for n in sizes}
        for m, runs in results.items()
    }
    print(f"\nall-reduce, {opts.world_size} processes, median of {opts.rounds} rounds per method")
    print(
        f"{'size':>9} {'local':>10} {'torchrun':>10} {'reference':>10} {'local/ref':>10} {'trun/local':>10}"
    )
    for n in sizes:
        loc, trun, ref = med["local"][n], med["torchrun"][n], med["reference"][n]
        print(
            f"{_fmt.binary_bytes(n):>9} {_fmt.seconds(loc):>10} {_fmt.seconds(trun):>10} "
            f"{_fmt.seconds(ref):>10} {loc / ref:>10.2f} {trun / loc:>10.2f}"
        )
    for method, runs in fits.items():
        print(f"\n{method} fits, one per round:")
        for fit in runs:
            print(
                f"  alpha {_fmt.seconds(fit.alpha_s)}, 1/beta {_fmt.si(fit.algorithm_bytes_per_s, 'B/s')}, "
                f"busbw {_fmt.si(fit.bus_bytes_per_s, 'B/s')}"
            )
    perf = nccl_tests(opts.world_size)
    if perf:
        print("\nnccl-tests all_reduce_perf (compare its busbw column):\n" + perf)


if __name__ == "__main__":
    main()
