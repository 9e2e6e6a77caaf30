"""A diagnosis in words: the essay's remedies, and the evidence written out.

:mod:`brrrlib.diagnosis` keeps its evidence as numbers (floors, batch
evidence, busy evidence, verdict); everything a learner reads is written here,
from those numbers only, so each sentence follows what was measured on this
device (a CPU or an H100 alike).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from html import escape
from typing import Any

from brrrlib import _fmt

__all__ = ["REMEDIES", "REUSE_REMEDY", "precision_remedies", "render_html", "render_text"]

#: What to do in each regime: the essay's table ("Making Deep Learning Go Brrrr", 2022).
REMEDIES: Mapping[str, tuple[str, ...]] = {
    "compute": (
        "Spend fewer FLOPs (a smaller model, or an algorithm that skips work), or buy a bigger "
        "device: you are already using this one well.",
    ),
    "memory": (
        "Fuse operators so intermediates stay in registers/cache: torch.compile (or a "
        "hand-written Triton kernel) turns a chain of elementwise ops into one pass.",
        "Make fewer passes over the data: reuse what is loaded, avoid needless copies, "
        ".contiguous() and recomputation of big intermediates from memory.",
    ),
    "overhead": (
        "Launch fewer kernels: torch.compile fuses ops into fewer, bigger ones (its wrapper is "
        "still Python, so on a GPU mode='reduce-overhead' adds CUDA graphs, which replay "
        "every launch at once), or capture a CUDA graph yourself.",
        "Do the same work in fewer, larger ops: vectorise Python loops, batch small ops "
        "(torch._foreach_* handles a list of tensors per launch, as optimizers' foreach=True "
        "does; fused=True goes further, one kernel), one matmul instead of many.",
        "Give each op more work: a bigger batch costs almost nothing extra while you are "
        "overhead-bound.",
    ),
}

#: Added for memory-bound work whose bytes do not grow with the batch (weights dominate).
REUSE_REMEDY = (
    "Batch more: the bytes here are the weights, read once per call whatever the batch, so "
    "more rows per call reuse each loaded weight (higher FLOP/byte) almost for free."
)

_WHERE = {"cuda": "the GPU", "mps": "the GPU", "cpu": "the CPU (inside ops)"}


def precision_remedies(regime: str, used: str, ceilings: Any) -> tuple[str, ...]:
    """The essay's precision remedies, as far as they hold here: never the precision the
    workload already uses, never one this device runs no faster (read from its ceilings).

    Compute-bound: faster units, if this device has a precision clearly faster
    than ``used`` (tensor cores, AMX), or back to fp32 when ``used`` has no
    fast path here. Memory-bound: fewer bytes per number, if not already 16-bit.
    """
    peaks = dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {}) or {})
    fast_path = getattr(ceilings, "fast_path", lambda p: p in peaks)
    out = []
    if regime == "compute":
        if used in peaks and used != "fp32" and not fast_path(used):
            out.append(
                f"Run the matmuls in fp32: {ceilings.precision_note(used)}, so {used} costs "
                "time here instead of saving it."
            )
        fast = getattr(ceilings, "fast_precision", "fp32")
        if fast != "fp32" and fast != used and used in peaks:
            gain = peaks[fast] / peaks[used]
            how = ("torch.set_float32_matmul_precision('high')" if fast == "tf32"
                   else f"torch.autocast('{ceilings.device}', dtype=torch.{_DTYPE_NAMES[fast]})")  # fmt: skip
            out.append(
                f"Use the faster units: matmuls in {fast} ({how}) measured {gain:.1f}x the {used} "
                "ceiling here."
            )
    if regime == "memory" and used in ("fp32", "fp64", "tf32"):
        out.append(
            "Store tensors in fewer bytes (bf16/fp16, int8 weights where accuracy allows): "
            "half the bytes per number, so twice the numbers per second through the same memory "
            "(it pays even without faster arithmetic)."
        )
    return tuple(out)


_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


# ---------------------------------------------------------------------- the verdict


def _margin_words(v: Any) -> str:
    runner = v.scores[v.runner_up]
    if runner <= 0:
        return "nothing else explains any"
    margin = v.margin
    if margin > 100:
        return f"more than 100x the runner-up ({v.runner_up})"
    return f"{margin:.1f}x the runner-up ({v.runner_up})"


def _lead_words(d: Any) -> str:
    """What the verdict's own share is, and where the number came from."""
    v, share = d.verdict, d.verdict.scores[d.regime]
    own = d.shares[d.regime]
    if d.regime == "overhead" and d.busy is not None and share > own + 1e-9:
        return (
            f"{_WHERE.get(d.busy.device, 'the device')} sat idle {d.busy.idle:.0%} of the time, "
            f"waiting for the host (ops x op overhead alone explain {own:.0%})"
        )
    return f"{d.regime} explains {share:.0%} of the measured time, {_margin_words(v)}"


def _against_words(item: tuple[str, Any]) -> str:
    kind, value = item
    if kind == "batch":
        return f"batch scaling points to {value}"
    if kind == "idle":
        return f"the device idled {value:.0%} of the time"
    return f"the GPU was busy {value:.0%} of the time"


def reason(d: Any) -> str:
    """Why the verdict is what it is, and how sure: one paragraph from the data."""
    v = d.verdict
    against = "; ".join(_against_words(a) for a in v.against)
    if v.settled_by == "idle and flat batch":
        b = d.batch
        text = (
            f"the device idled {d.busy.idle:.0%} of the time and doubling the batch left the "
            f"time flat (x{b.time_ratio:.2f}, interval x{b.low:.2f}-x{b.high:.2f}): the work is "
            "not what takes the time, whatever the bytes or FLOPs say"
        )
    elif v.settled_by == "flat batch":
        b = d.batch
        text = (
            f"no floor explains more than {max(d.shares.values()):.0%} of the time, and doubling "
            f"the batch doubled the work and bytes but left the time flat (x{b.time_ratio:.2f}, "
            f"interval x{b.low:.2f}-x{b.high:.2f}): the time is a fixed cost per call, overhead"
        )
    elif v.settled_by == "batch":
        s_top, s_run = d.shares[d.regime], d.shares[v.runner_up]
        text = (
            f"the roofline cannot separate {d.regime} ({s_top:.0%}) from {v.runner_up} "
            f"({s_run:.0%}), but when the batch doubled the time followed {d.regime}. The "
            "workload sits near the boundary: improving either side helps"
        )
    else:
        text = _lead_words(d)
    if against:
        text += f"; but {against}"
    if not v.settled_by and v.margin < 1.3:
        text += ". Two regimes are close: the workload sits near the boundary, improving either side helps"
    top = max(d.shares.values())
    if top < 0.25 and not v.settled_by:
        text += (
            f". No floor explains more than {top:.0%} of the time: the ops are slower than any "
            "ceiling predicts (data in odd layouts, slow kernels for this shape, or another "
            "program sharing the cores)"
        )
    if v.confidence == "high" and not against:
        text += "; the other probes agree"
    return text + "."


# ---------------------------------------------------------------------- evidence rows


def _compute_row(d: Any) -> tuple[str, str, str, str]:
    c, fl, share = d.ceilings, d.floors, d.shares["compute"]
    parts = [
        f"{p} matmul {_fmt.si(c.matmul_flops_per_s_by_dtype.get(p, c.matmul_flops_per_s), 'FLOP/s')}"
        for p in fl.compute_by_precision_s
        if p != "vector"
    ]
    parts.append(f"vector {_fmt.si(c.vector_flops_per_s, 'FLOP/s')}")
    special = getattr(fl, "special_s", {}) or {}
    parts += [f"{k} {_fmt.si(c.special_per_s.get(k, 0.0), '/s')}" for k in special]
    text = (
        f"{_fmt.si(d.counts.flops, 'FLOP')} need >= {_fmt.seconds(fl.compute_s)} at this "
        f"machine's {', '.join(parts)}"
    )
    if special and sum(special.values()) >= 0.5 * fl.compute_s:
        top = max(special, key=special.get)
        text += (
            f"; most of it is {top}: {_fmt.si(d.counts.special_by_function()[top])} evaluations "
            f"take >= {_fmt.seconds(special[top])}, a special function costing tens of "
            "instructions, not one FLOP"
        )
    return (
        "roofline: compute",
        f"{_fmt.si(d.achieved_flops_per_s, 'FLOP/s')} = {share:.0%} of the {d.precision} roof",
        "compute" if _leads(d, "compute") else "-",
        text + _over_100(share, "compute"),
    )


def _memory_row(d: Any) -> tuple[str, str, str, str]:
    share, c = d.shares["memory"], d.ceilings
    return (
        "roofline: memory",
        f"{_fmt.si(d.achieved_bytes_per_s, 'B/s')} = {share:.0%} of bandwidth",
        "memory" if _leads(d, "memory") else "-",
        f"{_fmt.si(d.counts.bytes_moved, 'B')} moved need >= {_fmt.seconds(d.floors.memory_s)} at "
        f"{_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')}" + _over_100(share, "memory"),
    )


def _overhead_row(d: Any) -> tuple[str, str, str, str]:
    share, c = d.shares["overhead"], d.ceilings
    ops = getattr(d.counts, "work_ops", d.counts.ops)
    return (
        "overhead: op count",
        f"{ops} ops x {_fmt.seconds(c.op_overhead_s)} = {share:.0%} of time",
        "overhead" if _leads(d, "overhead") else "-",
        f"the cheapest op costs {_fmt.seconds(c.op_overhead_s)} here (in place, no allocation), "
        f"so {ops} ops that do work cost >= {_fmt.seconds(d.floors.overhead_s)} of the "
        f"{_fmt.seconds(d.seconds)} measured" + _over_100(share, "overhead"),
    )


def _over_100(share: float, regime: str) -> str:
    if share <= 1.05:
        return "."
    if regime == "memory":
        return (
            " (over 100%: more bytes than DRAM could move in the time, so they came from cache; "
            "this floor does not bind)."
        )
    return f" (over 100%: the {regime} model overestimates here; this floor does not bind)."


def _busy_row(d: Any) -> tuple[str, str, str, str]:
    b = d.busy
    where = _WHERE.get(b.device, "the device")
    if b.busy < 0.5:
        says, text = "overhead", f"{where} sat idle {b.idle:.0%} of the time, waiting for the host."
    elif b.busy >= 0.8:
        says = "compute or memory"
        text = f"{where} was busy {b.busy:.0%} of the time: the time is the ops' own work"
        text += "." if b.device != "cpu" else "; on a CPU an op's own dispatch counts as busy."
        if b.queued_s >= 10e-6 and b.device != "cpu":
            text += (
                f" Kernels queued up to {_fmt.seconds(b.queued_s)} behind earlier work: the host "
                "ran ahead, as it should."
            )
    else:
        says, text = "-", f"{where} was idle {b.idle:.0%} of the time: some overhead."
    if b.outside_ops >= 0.2:
        text += (
            f" The host spent {b.outside_ops:.0%} of the time outside any op (Python between "
            "ops, module calls, hooks): overhead no op count sees."
        )
    return ("device busy (profile)", f"{b.busy:.0%} busy", says, text)


def _batch_row(d: Any) -> tuple[str, str, str, str]:
    b = d.batch
    g = b.growth
    growth = f"FLOPs x{g['compute']:.2f}, bytes x{g['memory']:.2f}, ops x{g['overhead']:.2f}"
    measured = f"time x{b.time_ratio:.2f} (x{b.low:.2f}-x{b.high:.2f})"
    if not b.narrow and not b.flat:
        return ("batch x2", measured, "-",
                f"the interval (x{b.low:.2f}-x{b.high:.2f}) is too wide to tell which count the "
                "time follows; this probe says nothing. Close other programs and diagnose again.")  # fmt: skip
    if b.follows:
        says = " or ".join(r for r in ("compute", "memory", "overhead") if r in b.follows)
        text = f"time follows {says} ({growth})."
    elif b.work_grew:
        says = "compute or memory"
        text = (
            f"time grew more than the work ({growth}): the doubled data left the cache, fresh "
            "memory page-faulted, or the library picked a slower kernel. The work, not "
            "overhead, sets the time."
        )
    else:
        says, text = "-", f"time follows none of {growth}."
    if b.flat and g["memory"] < 1.3:
        text += (
            " Flat time is not proof of overhead here: the bytes did not grow either (the "
            "weights dominate), so a memory-bound op stays flat too."
        )
    elif b.flat:
        text += " Twice the work for about the same time: the work was not what took the time."
    return ("batch x2", measured, says, text)


def _leads(d: Any, regime: str) -> bool:
    return d.shares[regime] >= max(d.shares.values())


def rows(d: Any) -> list[tuple[str, str, str, str]]:
    """(probe, measured, says, reading) for each piece of evidence, in order."""
    out = [_compute_row(d), _memory_row(d), _overhead_row(d)]
    if d.busy is not None:
        out.append(_busy_row(d))
    if d.batch is not None:
        out.append(_batch_row(d))
    return out


# ---------------------------------------------------------------------- the page


def _headline(d: Any) -> str:
    what = f"{d.label}: " if d.label else ""
    return (
        f"{what}{d.regime.upper()}-bound ({d.confidence} confidence) - "
        f"{_fmt.seconds(d.seconds)} per call on {d.timing.device}"
    )


def render_text(d: Any) -> str:
    """The diagnosis as plain text (``str(d)``)."""
    lines = [_headline(d), f"  why: {reason(d)}", "  evidence:"]
    table = rows(d)
    width = max(len(r[0]) for r in table)
    for probe, measured, says, reading in table:
        lines.append(f"    {probe:<{width}}  {measured:<34} -> {says}: {reading}")
    lines.extend(f"  note: {n}" for n in d.notes)
    lines.append("  what to do:")
    lines.extend(f"    - {r}" for r in d.remedies)
    return "\n".join(lines)


def render_html(d: Any) -> str:
    """The diagnosis for a notebook: verdict, reasons, roofline picture, evidence table."""
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c) if i != 2 else '<b>' + escape(c) + '</b>'}</td>"
                         for i, c in enumerate(r)) + "</tr>"
        for r in rows(d)
    )  # fmt: skip
    notes = "".join(f"<li>{escape(n)}</li>" for n in d.notes)
    label = escape(d.label + ": ") if d.label else ""
    return (
        f"<div><h3 style='margin:0'>{label}{escape(d.regime)}-bound "
        f"<small>({escape(d.confidence)} confidence, {escape(_fmt.seconds(d.seconds))} per call "
        f"on {escape(d.timing.device)})</small></h3><p>{escape(reason(d))}</p>{_roofline_img(d)}"
        "<table><tr><th>probe</th><th>measured</th><th>says</th><th>reading</th></tr>"
        f"{body}</table>" + (f"<ul>{notes}</ul>" if notes else "")
        + f"<p><b>What to do ({escape(d.regime)}-bound):</b></p><ul>"
        + "".join(f"<li>{escape(r)}</li>" for r in d.remedies) + "</ul></div>"
    )  # fmt: skip


def _roofline_img(d: Any) -> str:
    """The roofline as an inline PNG, drawn on a pyplot-free Figure (no stray plots)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 3.4), dpi=90)
    ax = fig.add_subplot()
    d.plot(ax=ax)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode()
    alt = (
        f"Roofline of {d.ceilings.device_name} ({d.precision} roof) with {d.label or 'the workload'}"
        f" at {d.counts.flops / max(d.counts.bytes_moved, 1):.3g} FLOP/byte and "
        f"{_fmt.si(d.achieved_flops_per_s, 'FLOP/s')}"
    )
    return f"<img src='data:image/png;base64,{data}' alt='{escape(alt)}' style='max-width:480px'>"
