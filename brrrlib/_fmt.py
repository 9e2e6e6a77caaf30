"""Numbers for people: the one unit picker, small statistics, tables, progress."""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "Progress",
    "Table",
    "binary_bytes",
    "elements",
    "error_line",
    "figure_img",
    "html_table",
    "iqr",
    "legend_beside",
    "median",
    "median_interval",
    "percent",
    "plain_x_ticks",
    "quantile",
    "text_table",
    "ratio",
    "seconds",
    "share",
    "si",
    "times",
]

_BIG = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``value`` with an SI prefix and three significant digits: "2.5 TFLOP/s", "8.1 µs"."""
    if not math.isfinite(value):
        return f"n/a {unit}".rstrip()
    if value == 0:
        return f"0 {unit}".rstrip()
    rounded = float(f"{value:.{digits}g}")  # round first: 999.99e-6 -> 1e-3 -> "1 ms"
    a = abs(rounded)
    for scale, prefix in _BIG if a >= 1 else _SMALL:  # below a pico: in picos
        if a >= scale * (1 - 1e-12) or prefix == "p":
            break
    return f"{rounded / scale:.{digits}g} {prefix}{unit}".rstrip()


def seconds(value: float) -> str:
    """A duration: "1.23 ms", "45 µs", "2.1 s", "1234 s" (no kiloseconds)."""
    if math.isfinite(value) and abs(value) >= 999.5:
        return f"{value:.0f} s"
    return si(value, "s")


def binary_bytes(nbytes: float) -> str:
    """A memory size in binary units, as memory is sold: 67108864 -> "64 MiB"."""
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def elements(n: int) -> str:
    """An element count: powers of two as "16 Mi", others with thousands separators."""
    for scale, unit in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,}"


def percent(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole``: "12%", "0.4%"; "-" when whole is 0."""
    if not whole or not math.isfinite(part / whole):
        return "-"
    share = 100 * part / whole
    return f"{share:.1f}%" if abs(share) < 1 else f"{share:.0f}%"


def times(x: float) -> str:
    """A ratio as a learner reads it: "0.013x", "1.30x", "16x", "3,096x"."""
    if x >= 99.5:
        return f"{x:,.0f}x"
    return f"{x:.0f}x" if x >= 9.95 else f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def share(part: float, whole: float) -> float:
    """``part / whole``, 0 when ``whole`` is 0 or less (nothing to take a share of)."""
    return part / whole if whole > 0 else 0.0


def ratio(num: float, den: float) -> float:
    """``num / den`` that never raises: inf for x/0, 1 for 0/0."""
    if den == 0:
        return 1.0 if num == 0 else math.inf
    return num / den


def error_line(err: BaseException, limit: int = 160) -> str:
    """The first line of ``err``'s message, at most ``limit`` characters (its type if empty)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:limit]


# ------------------------------------------------------------------ notebook pieces

_ALIGN = {"l": " style='text-align:left'", "r": " style='text-align:right'"}
#: A muted row: italic, in the theme's second text colour (grey on light, light grey on dark).
_MUTED = " style='font-style:italic;color:var(--jp-content-font-color2, #666)'"


def html_table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    caption: str = "",
    align: str = "",
    tags: Mapping[int, str] | None = None,
    muted: Sequence[bool] = (),
    hover: Sequence[str] = (),
) -> str:
    """A notebook table of strings, every one escaped here; no header row when ``header`` is empty."""
    e, tags = html.escape, tags or {}

    def tr(tag: str, row: Sequence[str], n: int = -1) -> str:
        tip = f" title='{e(hover[n])}'" if 0 <= n < len(hover) else ""  # on the first cell
        cells = (
            f"<{tag}{_ALIGN.get(align[i : i + 1], '')}{'' if i else tip}>"
            + (f"<{tags[i]}>{e(c)}</{tags[i]}>" if tag == "td" and i in tags else e(c))
            + f"</{tag}>"
            for i, c in enumerate(row)
        )
        return f"<tr{_MUTED if 0 <= n < len(muted) and muted[n] else ''}>{''.join(cells)}</tr>"

    cap = f"<caption style='caption-side:bottom;text-align:left'><small>{e(caption)}</small>"
    return (
        "<table>"
        + (f"{cap}</caption>" if caption else "")
        + (f"<thead>{tr('th', header)}</thead>" if header else "")
        + f"<tbody>{''.join(tr('td', row, n) for n, row in enumerate(rows))}</tbody></table>"
    )


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "", rule: bool = False
) -> str:
    """The same table as text: columns padded to their widest cell, "r" in ``align`` right-aligns one."""
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = (
            c.rjust(w) if align[i : i + 1] == "r" else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "  ".join(padded).rstrip()

    lines = [line(r) for r in table]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Table:
    """One table repr: ``_table()`` gives (title and notes, header, rows, column alignment)."""

    def __repr__(self) -> str:
        (title, *notes), header, rows, align = self._table()
        return "\n".join([title, text_table(header, rows, align), *notes])

    def _repr_html_(self) -> str:
        lines, header, rows, align = self._table()
        return html_table(header, rows, caption="; ".join(lines), align=align)


def figure_img(fig: Any, alt: str, max_width: str) -> str:
    """A matplotlib ``fig`` as an inline PNG ``<img>`` (base64), cropped to what it draws."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode()
    return (
        f"<img src='data:image/png;base64,{data}' alt='{html.escape(alt)}' "
        f"style='max-width:{max_width}'>"
    )


def legend_beside(ax: Any, **options: Any) -> None:
    """``ax``'s legend right of the axes, never over the data (:func:`figure_img` keeps it)."""
    where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
    ax.legend(**{**where, "fontsize": 8, "frameon": False, **options})


def plain_x_ticks(ax: Any) -> None:
    """x ticks on a log2 axis as plain numbers (1, 4, 16), not powers of two; no minor ticks."""
    from matplotlib import ticker

    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_locator(ticker.NullLocator())


# ------------------------------------------------------------------ statistics


def quantile(xs: Sequence[float], q: float) -> float:
    """The ``q``-quantile of ``xs`` (0 <= q <= 1), linearly interpolated (numpy's default)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q}")
    import numpy as np  # here: `brrr --help` imports this module before numpy is installed

    return float(np.quantile(xs, q)) if len(xs) else math.nan


def median(xs: Sequence[float]) -> float:
    """The middle value: half the samples are below it, half above. NaN when empty."""
    return quantile(xs, 0.5)


def iqr(xs: Sequence[float]) -> float:
    """Interquartile range: the 75th minus the 25th percentile (the middle half's width)."""
    return quantile(xs, 0.75) - quantile(xs, 0.25)


def median_interval(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of ``xs``: order statistics."""
    s, n = sorted(xs), len(xs)
    if n == 0:
        return (math.nan, math.nan)
    # the 1-based rank k: the first with P(Binomial(n, 1/2) <= k - 1) > alpha; k = 1 is (min, max)
    below = itertools.accumulate(math.comb(n, i) / 2**n for i in range(n + 1))
    k = max(next(i for i, p in enumerate(below) if p > (1 - confidence) / 2), 1)
    return (s[k - 1], s[n - k])


# ------------------------------------------------------------------ progress


class Progress:
    """The steps of a measurement: a ``tqdm.auto`` bar and one line per step."""

    def __init__(self, enabled: bool, total: int, prefix: str = "brrr") -> None:
        from tqdm.auto import tqdm  # a widget inside a Jupyter kernel, else text on stderr

        self.enabled, self.total, self.prefix = enabled, total, prefix
        self.step, self.t0, self._shown = 0, time.perf_counter(), None
        notebook = sys.modules.get("tqdm.notebook")
        widget = notebook is not None and issubclass(tqdm, notebook.tqdm_notebook)
        # disable=None: no bar where stderr is not a terminal (tqdm's own test)
        bar = {"total": total, "desc": prefix, "unit": "step", "leave": False}
        bar |= {"disable": None if enabled else True} | ({"display": False} if widget else {})
        self._bar = tqdm(**bar)
        # in a kernel the lines go to stdout (JupyterLab paints stderr pink) and the bar is shown
        # under an id, so that closing it also empties the saved output (an executed notebook,
        # the site's pages, would keep a bar stuck at 0% else)
        self._file = sys.stdout if widget else sys.stderr
        if widget and enabled:
            from IPython.display import display

            self._shown = display(self._bar.container, display_id=True)

    def __call__(self, message: str) -> None:
        self.step += 1
        self._line(f" [{self.step}/{self.total}] {time.perf_counter() - self.t0:5.1f}s  {message}")
        self._bar.update(1)
        if self.step >= self.total:
            self._bar.close()
            if self._shown is not None:
                self._shown.update({"text/plain": ""}, raw=True)

    def say(self, message: str) -> None:
        """A line without a step number (a heading or a note)."""
        self._line(f": {message}")

    def _line(self, text: str) -> None:
        if self.enabled:
            self._bar.write(self.prefix + text, file=self._file)
