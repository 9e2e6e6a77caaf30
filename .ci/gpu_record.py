"""What a GPU run records beside the executed chapters: traces, a report, the sweeps.

    python .ci/gpu_record.py DEST [--quick]

* ``DEST/traces/<name>.json``: ``bl.profile(fn, runs=...).export_chrome_trace`` of the
  workloads chapter 03 reads (a short and a long pointwise chain, eager, compiled, in a
  CUDA graph and with ``mode="reduce-overhead"``; one tiny add; 64 small matmuls as a
  loop and as one ``bmm``; a transformer block at batch 1). Each loads with
  ``bl.Trace.from_chrome_trace``.
* ``DEST/reports/measured-<gpu>-<device>.json``: ``bl.report()`` of the ceilings the run
  measured (``brrr doctor`` measured them first; the cache serves them here).
* ``DEST/sweeps/ladder-<gpu>.json``: square ``torch.mm`` for n = 32 ... 16384 in every
  precision the device has (TF32 through ``allow_tf32``), and chapter 02's ``x = x * 2``
  repeated 1 ... 256 times on 2**27 fp32 elements, eager (to 64) and fused: the format
  ``brrrlib.figures.recorded_sweeps`` reads.

``--quick`` (the CPU dry run's fast path) records two small traces and the report only.
``--budget-s`` bounds the whole: the repeat sweep (a compile per point) is left out when
less than a minute is left for it, and the sweep file says so.
Every piece is tried on its own: one that fails is reported and the others still run;
the exit status is 1 if any failed. Used by ``.ci/gpu.py run`` (its ``record`` step).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

import brrrlib as bl
from brrrlib import workloads
from brrrlib.widgets import _experiments

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu  # noqa: E402  (.ci/gpu.py: how a recording names its device)

REPEAT_ELEMENTS = 2**27
MATMUL_SIZES = tuple(2**k for k in range(5, 15))


def traces(dev: torch.device, quick: bool) -> dict:
    """name -> (fn, args, runs): the workloads whose traces the recording keeps."""
    short_fn, short_args = workloads.pointwise_chain(numel=1000, device=dev)
    one = torch.ones(1, device=dev)
    chosen = {
        "short_chain_1k": (short_fn, short_args, 3),
        "add_1_element": (torch.add, (one, one.clone()), 5),
    }
    if quick:
        return chosen
    long_fn, long_args = workloads.pointwise_chain(large=True, device=dev)
    block, block_args = workloads.transformer_block(batch=1, device=dev)[:2]
    chosen.update(
        {
            "long_chain_64Mi": (long_fn, long_args, 2),
            "compiled_long_chain_64Mi": (torch.compile(long_fn), long_args, 2),
            "small_matmuls_loop64": (*workloads.small_matmuls(n=64, device=dev), 3),
            "small_matmuls_bmm": (*workloads.small_matmuls(n=64, batched=True, device=dev), 3),
            "tinyblock_b1_eager": (block, block_args, 3),
        }
    )
    if dev.type == "cuda":
        chosen["graph_replay_1k"] = (workloads.cuda_graph(short_fn, *short_args), (), 3)
        reduce = torch.compile(short_fn, mode="reduce-overhead")
        chosen["chain_reduce_overhead"] = (reduce, short_args, 3)
    return chosen


def matmul_ladder(dev: torch.device) -> list[dict]:
    """Square ``torch.mm`` per precision and size: median seconds and TFLOP/s."""
    dtypes = {"fp32": torch.float32, "tf32": torch.float32}
    if dev.type == "cuda":
        dtypes.update({"bf16": torch.bfloat16, "fp16": torch.float16})
    rows = []
    for prec, dtype in dtypes.items():
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        for n in MATMUL_SIZES if dev.type == "cuda" else MATMUL_SIZES[:6]:
            a, b = (torch.randn(n, n, device=dev, dtype=dtype) for _ in range(2))
            out = torch.empty_like(a)
            s = bl.benchmark(torch.mm, a, b, out=out).median_s
            rows.append({"prec": prec, "n": n, "median_s": s, "tflops": 2 * n**3 / s / 1e12})
            del a, b, out
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def repeat_sweep(dev: torch.device) -> list[dict]:
    """Chapter 02's repeat experiment on ``REPEAT_ELEMENTS`` fp32 elements, eager and fused."""
    rows = []
    size = REPEAT_ELEMENTS if dev.type == "cuda" else 2**22
    for repeat in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        row = {"dtype": "torch.float32", "repeat": repeat, "eager_s": math.nan}
        for mode in ("eager", "fused") if repeat <= 64 else ("fused",):
            case = _experiments.repeat_case(size, repeat, mode, dev)
            row[f"{mode}_s"] = bl.benchmark(case.fn).median_s
            del case
        rows.append(row)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest", type=Path)
    p.add_argument("--quick", action="store_true", help="two small traces and the report only")
    p.add_argument("--budget-s", type=float, default=600.0, help="for everything (600)")
    opts = p.parse_args()
    end = time.monotonic() + opts.budget_s
    dev = bl.machine.physical(bl.device())
    name = bl.machine.device_name(dev)
    short = gpu._slug(gpu._short_name(name, dev.type))  # as unpack names the recording
    failed = []

    def attempt(what: str, fn) -> None:
        try:
            fn()
            print(f"recorded {what}", flush=True)
        except Exception:
            failed.append(what)
            print(f"FAILED {what}:\n{traceback.format_exc()}", flush=True)

    (opts.dest / "traces").mkdir(parents=True, exist_ok=True)
    for trace_name, (fn, args, runs) in traces(dev, opts.quick).items():
        path = opts.dest / "traces" / f"{trace_name}.json"
        profile = functools.partial(bl.profile, fn, *args, runs=runs, label=trace_name)
        attempt(f"trace {trace_name}", lambda p=path, f=profile: f().export_chrome_trace(p))
    (opts.dest / "reports").mkdir(exist_ok=True)
    report = opts.dest / "reports" / f"measured-{short}-{dev.type}.json"
    attempt("report", lambda: bl.report(report, name=f"recorded: {name}"))
    if not opts.quick:

        def sweeps() -> None:
            data = {"device": name, "torch": torch.__version__, "matmul": [], "repeat": []}
            path = opts.dest / "sweeps" / f"ladder-{short}.json"
            path.parent.mkdir(exist_ok=True)
            data["matmul"] = matmul_ladder(dev)
            path.write_text(json.dumps(data, indent=1))
            if end - time.monotonic() < 60:
                data["repeat_left_out"] = "less than a minute was left for it"
            else:
                data["repeat"] = repeat_sweep(dev)
            path.write_text(json.dumps(data, indent=1, allow_nan=True))

        attempt("sweeps", sweeps)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
