"""How a :class:`brrrlib.trace.Trace` shows itself: the timeline drawing and the summary words.

Measuring and parsing live in :mod:`brrrlib.trace`; this module only reads a
trace's fields and derived numbers and turns them into a matplotlib timeline
(host lane over device lane, idle gaps hatched), a few lines of text, and a
notebook readout. Words are rendered from numbers here, once: "host ran
ahead" is said only when some kernel really queued behind earlier work.
"""

from __future__ import annotations

import base64
import html as _html
import io
import re
from typing import Any

from brrrlib import _fmt
from brrrlib._aten_ops import COMPILED_GRAPH

__all__ = ["html", "image", "plot", "short", "summary_lines"]

#: Colour of each op family on the timeline (matplotlib's tab10 names).
COLORS = {
    "matmul": "tab:blue",
    "pointwise": "tab:orange",
    "reduction": "tab:green",
    "normalization": "tab:purple",
    "memcpy": "tab:brown",
    "fused": "tab:olive",
    "other": "tab:gray",
}


def plot(trace: Any, ax=None, *, runs: list[int]):
    """Draw ``runs`` of ``trace`` on ``ax`` (a new figure when None); return the Axes."""
    created = ax is None
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(10, 2.8))
    t0 = trace.runs[runs[0]][0] if runs else 0.0
    t1 = trace.runs[runs[-1]][1] if runs else 1.0
    span = max(t1 - t0, 1e-9)
    scale, unit = (1e3, "ms") if span >= 1e-3 else (1e6, "µs")
    lanes = {"host": 1.0, "device": 0.0}
    for i in trace.intervals:
        if i.lane not in lanes or i.run not in runs:
            continue
        x, w, y = (i.start_s - t0) * scale, i.duration_s * scale, lanes[i.lane]
        ax.broken_barh([(x, w)], (y - 0.35, 0.7), facecolors=COLORS.get(i.category, "tab:gray"),
                       edgecolors="white", linewidth=0.3)  # fmt: skip
        text = short(i.name)
        if w > 0.007 * len(text) * span * scale:  # label only where it fits
            ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=7, clip_on=True)
    for g in (g for g in trace.gaps if g.run in runs):
        ax.broken_barh([((g.start_s - t0) * scale, g.duration_s * scale)], (-0.35, 0.7),
                       facecolors="none", edgecolors="tab:red", hatch="////", linewidth=0.0,
                       alpha=0.5)  # fmt: skip
    for r in runs[1:]:
        ax.axvline((trace.runs[r][0] - t0) * scale, color="k", ls="--", lw=0.8)
    _decorate(trace, ax, span * scale, unit, lanes, runs)
    if created:
        ax.figure.tight_layout()
    return ax


def _decorate(trace: Any, ax, width: float, unit: str, lanes: dict, runs) -> None:
    """Axis labels, title and the legend of the categories drawn."""
    from matplotlib.patches import Rectangle

    ax.set_yticks([0.0, 1.0])
    device_name = "GPU kernels" if trace.device == "cuda" else "CPU op bodies"
    ax.set_yticklabels([f"device\n({device_name})", "host\n(dispatched ops)"])
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlim(0, width)
    ax.set_xlabel(f"time since run start ({unit})")
    title = trace.label or "trace"
    if trace.recorded_on:
        title += f" (recorded: {trace.recorded_on})"
    runs = list(runs)
    busy = sum(trace.busy_s(r) for r in runs) / max(sum(trace.wall_s[r] for r in runs), 1e-12)
    which = f" in run {runs[0]}" if len(runs) == 1 else ""
    ax.set_title(f"{title}: device busy {busy:.0%}{which} (hatched = device idle)", loc="left")
    used = sorted({i.category for i in trace.intervals if i.lane in lanes})
    handles = [Rectangle((0, 0), 1, 1, color=COLORS.get(c, "tab:gray")) for c in used]
    if handles:
        ax.legend(handles, used, loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7,
                  ncol=len(used), frameon=False)  # fmt: skip


def image(trace: Any) -> str:
    """The first steady run's timeline as an inline PNG, on a pyplot-free Figure (no stray plots)."""
    from matplotlib.figure import Figure

    if not trace.runs:
        return ""
    run = trace.steady_runs[0] if trace.steady_runs else 0
    fig = Figure(figsize=(9, 2.4), dpi=80)
    ax = fig.add_subplot()
    plot(trace, ax, runs=[run])
    ax.set_title(ax.get_title(loc="left") + f" (run {run})", loc="left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode()
    busy = trace.busy_fraction_per_run[run] if run < len(trace.busy_fraction_per_run) else None
    alt = (
        f"Timeline of {trace.label or 'the workload'}, run {run}: the host lane (Python and "
        f"dispatch) above the device lane (kernels)"
        + (f"; the device was busy {busy:.0%} of the run" if busy is not None else "")
    )
    return f"<img src='data:image/png;base64,{data}' alt='{_html.escape(alt)}' style='max-width:100%'>"


def summary_lines(trace: Any) -> list[str]:
    """The summary: a head line, device busy and idle, findings, the top five ops."""
    w, total = trace.wall_s, sum(trace.wall_s) or 1.0
    where = f" of {trace.label}" if trace.label else ""
    machine = trace.recorded_on or trace.device_name
    on = trace.device
    if machine:
        on += f" ({'recorded on ' if trace.recorded_on else ''}{machine})"
    lines = [
        f"Trace{where} on {on}: {len(w)} run(s), wall {_fmt.seconds(trace.median_wall_s)} median "
        f"(min {_fmt.seconds(min(w, default=0.0))}, max {_fmt.seconds(max(w, default=0.0))})"
    ]
    idle = trace.idle_by_cause()
    causes = ", ".join(
        f"{k} {_fmt.percent(v, total)}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1])
    )
    lines.append(
        f"  device busy {_fmt.percent(trace.busy_s(), total)} of wall time; idle "
        f"{_fmt.percent(sum(idle.values()), total)}" + (f" ({causes})" if causes else "")
    )
    lines += [f"  {line}" for line in findings(trace)]
    for op in trace.top_ops(5):
        lines.append(
            f"  {_fmt.percent(op.share, 1.0):>5}  {_fmt.seconds(op.total_s):>9}  {op.calls:4d}x  "
            f"{short(op.name, 60)}  [{op.category}]"
        )
    return lines


def findings(trace: Any) -> list[str]:
    """Launch delays said as what they mean, host time outside ops, an inflated run 0."""
    out = []
    d = trace.launch_delays_s
    if d:
        delays = (
            f"launch -> kernel start median {_fmt.seconds(_fmt.median(d))}, "
            f"max {_fmt.seconds(max(d))} over {len(d)} kernels"
        )
        if trace.host_ran_ahead:
            queued = [q for q in trace.queued_s if q >= trace.RAN_AHEAD_MIN_S]
            out.append(
                f"host ran ahead: {len(queued)} of {len(d)} kernels queued behind earlier work, "
                f"up to {_fmt.seconds(max(queued))} ({delays})"
            )
        else:
            out.append(f"{delays}; the GPU was idle when each launch arrived: it waited on the host")
    if trace.runs:
        out.append(
            f"host outside any op: {_fmt.seconds(_fmt.median(trace.outside_ops_s))} per run, "
            f"{_fmt.percent(trace.outside_ops_fraction, 1.0)} of wall time (Python between ops)"
        )
    if trace.steady_runs[:1] == (1,):
        out.append(
            f"run 0 took {trace.first_run_inflation:.1f}x the later runs: set-up, not the "
            "workload; read runs 1 and later (trace.steady_runs)"
        )
    return out


def html(trace: Any) -> str:
    """The notebook readout: head line, timeline, findings, the top eight ops as a table."""
    esc = _html.escape
    rows = "".join(
        f"<tr><td title='{esc(op.name)}'>{esc(short(op.name, 60))}</td><td>{op.category}</td>"
        f"<td>{op.calls}</td><td>{_fmt.seconds(op.total_s)}</td>"
        f"<td>{_fmt.percent(op.share, 1.0)}</td></tr>"
        for op in trace.top_ops(8)
    )
    head, busy = summary_lines(trace)[:2]
    notes = "<br>".join(esc(line) for line in [busy.strip(), *findings(trace)])
    return (
        f"<div><b>{esc(head)}</b><br>{image(trace)}<br>{notes}"
        "<table><tr><th>op</th><th>category</th><th>calls</th><th>device time</th>"
        f"<th>share</th></tr>{rows}</table>"
        "<small style='color:var(--jp-ui-font-color2, #666)'>trace.plot() draws the timeline; "
        "trace.export_chrome_trace(path) opens in Perfetto.</small></div>"
    )


def short(name: str, n: int = 18) -> str:
    """A label that fits: ``aten::`` dropped; a kernel's C++ signature cut to its bare name."""
    if name.startswith(COMPILED_GRAPH):
        name = "compiled graph"
    name = name.replace("aten::", "")
    if len(name) > n and ("<" in name or "(" in name):
        bare = re.split(r"[<(]", name.removeprefix("void "), maxsplit=1)[0].strip()
        bare = bare.split("::")[-1] or name
        # Room to spare: name the functor too (CUDAFunctor_add, MulFunctor, sum_functor).
        functors = re.findall(r"\w*(?:Functor|functor)\w*", name)
        with_functor = f"{bare}<{functors[-1]}>" if functors else bare
        name = with_functor if len(with_functor) <= n else bare
    return name if len(name) <= n else name[: n - 1] + "…"
