"""Chapter 06's decoder against its floors: prefill, decode eager and compiled, bytes, batching.

On the device in use (bl.device(); BRRR_DEVICE=cpu for the CPU), for the two
sizes ``decoding.shapes`` picks here, print what chapter 06 measures and the
ratios it sets beside the model, including what the chapter itself leaves out
to stay quick (compiling the large model's step):

* prefill of 256 tokens: FLOP/s as a share of the fp32 matmul ceiling;
* decode at batch 1, eager and compiled (``mode="reduce-overhead"`` on CUDA),
  for both sizes: tokens/s, and bytes read per second (weights and KV cache)
  as a share of the measured bandwidth: gpt-fast's "bandwidth achieved";
* 16-bit and int8 weights against fp32 at batch 1, in alternating rounds
  (``bl.compare``), beside the speed-up their bytes predict;
* the batch sweep: the knee the counts predict against the one measured
  (batch 1's time per step over the largest batch's time per sequence).

Run:

    python benchmarks/decode_roofline.py [--threads T] [--no-compile] [--json PATH]

``--json`` also writes the decode rows (tokens/s, bytes/s and their shares of the copy
ceiling, the read rate and, on a GPU of the spec table, the sheet's bandwidth) as data.

The numbers are properties of a quiet machine: run it with nothing else busy
(``uptime`` below 1 on a 2-core machine), and quote them with the date.
"""

import argparse
import json
import math
import time

import torch

import brrrlib as bl
from brrrlib import decoding, hardware
from brrrlib.decoding._steps import measure_step

CONTEXT, PROMPT, SWEEP_CONTEXT = 256, 256, 32
#: The decode rows as data, for ``--json`` (written after each row: a stopped run keeps its rows).
ROWS: list[dict] = []
JSON_PATH: list[str] = []


def _share(rate: float, ceiling: float) -> str:
    return f"{rate / ceiling:.0%}" + (" (above the ceiling)" if rate > ceiling else "")


def _decode(model, c, read_bw, fn=None, label=""):
    s = measure_step(model, 1, CONTEXT, fn=fn, budget_s=0.5)
    print(
        f"  {label:28} {s.seconds * 1e3:8.3f} ms/token {s.tokens_per_s:9,.1f} tokens/s "
        f"{s.bytes_per_s / 1e9:7.2f} GB/s = {_share(s.bytes_per_s, c.mem_bandwidth_bytes_per_s)} "
        f"of the copy bandwidth, {_share(s.bytes_per_s, read_bw)} of the read rate"
    )
    spec = hardware.spec_for_device_name(c.device_name) if c.device.startswith("cuda") else None
    ROWS.append(
        {
            "label": label,
            "tokens_per_s": s.tokens_per_s,
            "bytes_per_s": s.bytes_per_s,
            "share_of_copy": s.bytes_per_s / c.mem_bandwidth_bytes_per_s,
            "share_of_read": s.bytes_per_s / read_bw,
            "share_of_sheet": s.bytes_per_s / spec.mem_bandwidth_bytes_per_s if spec else None,
        }
    )
    for path in JSON_PATH:
        with open(path, "w") as f:
            json.dump({"device": c.device_name, "decode": ROWS}, f, indent=1)
    return s


def _compiled(model, dev):
    mode = "reduce-overhead" if dev.type == "cuda" else None
    t0 = time.perf_counter()
    fn = torch.compile(model.decode, mode=mode, fullgraph=True)
    step = decoding.decode_step(model, 1, CONTEXT, fn=fn)
    for _ in range(3):
        step()
    return fn, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--json", metavar="PATH", help="also write the decode rows to PATH")
    opts = parser.parse_args()
    JSON_PATH.extend([opts.json] if opts.json else [])
    if opts.threads is not None:
        torch.set_num_threads(opts.threads)
    dev = bl.device()
    c = bl.measure_ceilings(dev, progress=False)
    bw, peak = c.mem_bandwidth_bytes_per_s, c.matmul_flops_per_s
    print(
        f"{c.device_name} ({dev}), {torch.get_num_threads()} threads: matmul fp32 "
        f"{peak / 1e9:.0f} GFLOP/s, bandwidth {bw / 1e9:.1f} GB/s"
    )
    small_shape, shape = decoding.shapes(c, dev)
    model = decoding.build(shape, device=dev)
    print(f"large: {shape}, {decoding.parameters(shape) / 1e6:.1f} M parameters")

    cache = decoding.new_cache(model, 1, PROMPT)
    ids = torch.zeros(1, PROMPT, dtype=torch.long, device=dev)
    t = bl.benchmark(model.prefill, ids, cache, budget_s=1.0)
    flops = decoding.prefill_flops(shape, 1, PROMPT)
    print(
        f"prefill {PROMPT} tokens: {PROMPT / t.median_s:,.0f} tokens/s, "
        f"{flops / t.median_s / 1e9:.0f} GFLOP/s = {_share(flops / t.median_s, peak)} of fp32 matmul"
    )

    reader = torch.ones(min(decoding.weight_bytes(shape) // 4, 2**28), device=dev)
    read_bw = reader.nbytes / bl.benchmark(torch.sum, reader, budget_s=1.0).median_s
    del reader
    print(f"read rate (x.sum() over the fp32 weights' size): {read_bw / 1e9:.1f} GB/s")
    print(f"decode, batch 1, context {CONTEXT}:")
    for name, m in (("large", model), ("small", decoding.build(small_shape, device=dev))):
        eager = _decode(m, c, read_bw, label=f"{name}, eager")
        if not opts.no_compile:
            fn, seconds = _compiled(m, dev)
            compiled = _decode(m, c, read_bw, fn=fn, label=f"{name}, compiled ({seconds:.0f} s)")
            print(f"  {'':28} compiled / eager: x{compiled.seconds / eager.seconds:.2f} time")

    half = decoding.half_precision(c)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[half]
    model_half = decoding.build(shape, device=dev, dtype=dtype)
    steps = {
        "fp32": decoding.decode_step(model, 1, CONTEXT),
        half: decoding.decode_step(model_half, 1, CONTEXT),
    }
    kv16 = decoding.kv_cache_bytes(shape, 1, CONTEXT, 2)  # the int8 model's cache is 16-bit too
    kv = {"fp32": decoding.kv_cache_bytes(shape, 1, CONTEXT, 4), half: kv16, "int8": kv16}
    if decoding.int8_kernel(dev, dtype):
        steps["int8"] = decoding.decode_step(decoding.quantize_int8(model_half), 1, CONTEXT)
    nbytes = {p: decoding.weight_bytes(shape, p) + kv[p] for p in steps}
    print("fewer bytes per weight, against fp32 (bl.compare, alternating rounds):")
    for p in list(steps)[1:]:
        cmp = bl.compare(steps["fp32"], steps[p], labels=("fp32", p), budget_s=4.0)
        print(f"  {p}: predicted x{nbytes[p] / nbytes['fp32']:.2f} time, measured {cmp.says()}")

    w_s = decoding.weight_bytes(shape) / bw
    per_seq = (
        decoding.decode_flops(shape, 1, SWEEP_CONTEXT) / peak
        - decoding.kv_cache_bytes(shape, 1, SWEEP_CONTEXT) / bw
    )
    knee = w_s / per_seq if per_seq > 0 else math.inf
    top = min(256 if dev.type == "cpu" else 1024, max(64, 8 * knee))
    sweep = decoding.batch_sweep(
        model, [2**k for k in range(int(math.log2(top)) + 1)], context=SWEEP_CONTEXT, budget_s=0.3
    )
    print(f"batch sweep, context {SWEEP_CONTEXT}:\n{sweep}")
    measured = sweep.seconds[0] / (sweep.seconds[-1] / sweep.batches[-1])
    print(f"knee: predicted batch {knee:.1f}, measured {measured:.1f} (x{measured / knee:.2f})")


if __name__ == "__main__":
    main()
