"""This machine's ceilings, measured: the factory, the trucks and the paperwork.

:func:`measure_ceilings` measures what the machine in front of you can do, one
short function per ceiling (chapter 00 introduces all of them):

* **matmul** FLOP/s per precision (:func:`_matmul`): fp32 on every device;
  bf16 and fp16 where the device has them (a CPU too); TF32 on CUDA. Each
  FLOP a workload does is judged against the roof of its own precision.
* **vector** FLOP/s (:func:`_vector`): elementwise multiplies on data in cache,
  one FLOP per element per op, as :func:`brrrlib.count` counts them.
* **memory bandwidth** (:func:`_bandwidth`): a large copy into memory that
  already exists.
* **op overhead** (:func:`_op_overhead`): one tiny op in its cheapest form.

Each is measured in *rounds* (:func:`_in_rounds`) until the last three agree
within 10%, or its time budget runs out; the whole measurement stays under
~30 s on a 2-core laptop. A ceiling that never settled is kept, flagged noisy
(:attr:`Ceilings.noisy` says which and by how much), and measured again the
next time a new Python process asks. Results are cached as JSON, one file
per machine, device, thread count and torch version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import socket
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from brrrlib import _files, _fmt, devices, hardware, timing

__all__ = ["Ceilings", "measure_ceilings"]

#: A ceiling whose last rounds differ by more than this fraction is "noisy".
SPREAD_LIMIT = 0.1
#: Below this share of its threads' CPU time during the matmul, the CPU was shared.
MIN_CPU_SHARE = 0.8
#: Below this share, too few undisturbed samples exist to drop the rest: the ceilings are noisy.
NOISY_CPU_SHARE = 0.5
#: The matmul precisions, in the order tables list them.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
           "fp16": torch.float16}  # fmt: skip
#: Bumped whenever the way a ceiling is measured changes, so old cached files are not reused.
_METHOD_VERSION = 4


@dataclass(frozen=True)
class Ceilings:
    """This machine's ceilings, measured (see :func:`measure_ceilings`).

    * ``matmul_flops_per_s``: a large square fp32 matmul, no TF32, through
      the fastest kernel PyTorch has here (``matmul_method`` lists each one
      timed): the factory's top speed in fp32. ``matmul_flops_per_s_by_dtype``
      adds the other precisions measured here (``"tf32"``, ``"bf16"``,
      ``"fp16"``); :meth:`matmul_peak` picks one.
    * ``vector_flops_per_s``: fp32 elementwise multiplies on data already in
      cache, so no trucks are waiting: one FLOP per element per op, the rate
      of non-matmul arithmetic. (Spec sheets count a fused multiply-add as
      two FLOPs, so their fp32 peak is about twice this.)
    * ``mem_bandwidth_bytes_per_s``: bytes read + written per second by a
      large copy into memory that exists.
    * ``op_overhead_s``: one tiny op in its cheapest form (in place on one
      element: no allocation), end to end: Python, the dispatcher and (on a
      GPU) the kernel launch. Every op that does work pays at least this.

    Each number is the median of the last rounds of its measurement;
    ``spread`` maps each ceiling to how much those rounds differed (a
    fraction of the median), ``rounds`` to how many rounds it took.
    ``cpu_share`` is the CPU time this process got during the matmul over
    wall time x threads: below 80%, another program shared the cores.
    """

    device: str
    device_name: str
    matmul_flops_per_s: float
    vector_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    op_overhead_s: float
    matmul_flops_per_s_by_dtype: Mapping[str, float] = field(default_factory=dict)
    spread: Mapping[str, float] = field(default_factory=dict)
    rounds: Mapping[str, int] = field(default_factory=dict)
    cpu_share: float = 1.0
    num_threads: int = 1
    matmul_size: int = 0
    copy_bytes: int = 0
    vector_method: str = ""
    matmul_method: str = ""
    torch_version: str = ""
    library_version: str = ""
    host: str = ""
    measured_at: str = ""

    def __post_init__(self) -> None:
        for name in ("matmul_flops_per_s", "vector_flops_per_s", "mem_bandwidth_bytes_per_s",
                     "op_overhead_s"):  # fmt: skip
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (ok and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        by_dtype = {"fp32": self.matmul_flops_per_s, **dict(self.matmul_flops_per_s_by_dtype)}
        object.__setattr__(self, "matmul_flops_per_s_by_dtype", MappingProxyType(by_dtype))
        for name in ("spread", "rounds"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def __hash__(self) -> int:
        return hash((self.device, self.device_name, self.measured_at))

    # -- reading them ----------------------------------------------------------------
    def matmul_peak(self, precision: str = "fp32") -> float:
        """Matmul FLOP/s for ``precision`` ("fp32", "tf32", "bf16", "fp16").

        A precision not measured here raises ``KeyError`` naming those that
        were: judging bf16 work against the fp32 roof would be a wrong model.
        """
        key = hardware.dtype_key(precision)
        if key not in self.matmul_flops_per_s_by_dtype:
            raise KeyError(
                f"no {key} matmul ceiling was measured on {self.device_name}; measured: "
                f"{', '.join(self.matmul_flops_per_s_by_dtype)}"
            )
        return self.matmul_flops_per_s_by_dtype[key]

    def ridge_point_flops_per_byte(self, precision: str = "fp32") -> float:
        """FLOPs per byte a matmul of ``precision`` needs before memory stops setting the pace."""
        return self.matmul_peak(precision) / self.mem_bandwidth_bytes_per_s

    @property
    def noisy(self) -> bool:
        """True if a ceiling's last rounds never agreed within 10%: see :meth:`noise_notes`."""
        return bool(self.noise_notes())

    @property
    def shared_cpu(self) -> bool:
        """True when another program used the cores during the matmul (``cpu_share`` < 80%).

        Not noisy by itself down to 50%: samples it disturbed were dropped and
        replaced (:func:`brrrlib.benchmark`, step 5), and the rounds still had
        to agree. Below 50% too few undisturbed samples remain: noisy.
        """
        return self.device == "cpu" and NOISY_CPU_SHARE <= self.cpu_share < MIN_CPU_SHARE

    def noise_notes(self) -> tuple[str, ...]:
        """One sentence per number to distrust, saying by how much."""
        notes = []
        if self.device == "cpu" and self.cpu_share < NOISY_CPU_SHARE:
            notes.append(
                f"this process got only {self.cpu_share:.0%} of its {self.num_threads} threads' "
                "CPU time: other programs kept the cores so busy that every number may read low "
                "(by up to the same factor); close them and measure again"
            )
        names = {"matmul": "matmul FLOP/s", "vector": "vector FLOP/s",
                 "memory": "memory bandwidth", "overhead": "op overhead"}  # fmt: skip
        for key, value in self.spread.items():
            if value > SPREAD_LIMIT:
                what = names.get(key, key.replace("matmul_", "matmul ") + " FLOP/s")
                notes.append(
                    f"the {what} varied {value:.0%} between rounds: trust it to ±{value:.0%}"
                )
        return tuple(notes)

    def nearest_spec(self) -> hardware.DeviceSpec:
        """The spec-sheet row to set beside these measurements.

        On a GPU, the row whose name matches ``device_name``. Otherwise (a
        CPU, an unlisted GPU) the row closest in log fp32 FLOP/s and log
        bandwidth, which for a laptop CPU is usually the T4: the gap is the lesson.
        """
        by_name = hardware.spec_for_device_name(self.device_name) if self.device == "cuda" else None
        if by_name is not None:
            return by_name

        def distance(s: hardware.DeviceSpec) -> float:
            return math.hypot(
                math.log(s.peak("fp32") / self.matmul_flops_per_s),
                math.log(s.mem_bandwidth_bytes_per_s / self.mem_bandwidth_bytes_per_s),
            )

        return min(hardware.specs(), key=distance)

    # -- rendering ----------------------------------------------------------------------
    def _rows(self) -> list[tuple[str, str]]:
        rows = [(f"matmul ({k})", _fmt.si(v, "FLOP/s"))
                for k, v in self.matmul_flops_per_s_by_dtype.items()]  # fmt: skip
        rows += [
            ("vector (fp32 multiplies)", _fmt.si(self.vector_flops_per_s, "FLOP/s")),
            ("memory bandwidth", _fmt.si(self.mem_bandwidth_bytes_per_s, "B/s")),
            ("op overhead", _fmt.seconds(self.op_overhead_s)),
        ]
        rows += [(f"ridge point ({k})", f"{self.ridge_point_flops_per_byte(k):.3g} FLOP/byte")
                 for k in self.matmul_flops_per_s_by_dtype]  # fmt: skip
        return rows

    def _title(self) -> str:
        threads = f", {self.num_threads} threads" if self.device == "cpu" else ""
        noisy = " NOISY (see notes)" if self.noisy else ""
        return (
            f"{self.device} ({self.device_name}{threads}), measured {self.measured_at[:16]}{noisy}"
        )

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        lines = [f"Ceilings: {self._title()}"]
        lines += [f"  {k:<{width}}  {v}" for k, v in self._rows()]
        lines += [f"  note: {n}" for n in self._notes()]
        return "\n".join(lines)

    def _notes(self) -> list[str]:
        notes = list(self.noise_notes())
        if self.shared_cpu:
            notes.append(
                f"another program used the cores meanwhile (this process got {self.cpu_share:.0%} "
                f"of its {self.num_threads} threads' CPU time); the samples it disturbed were "
                "dropped and replaced"
            )
        return notes

    def _repr_html_(self) -> str:
        from html import escape

        body = "".join(
            f"<tr><td style='text-align:left'>{escape(k)}</td>"
            f"<td style='text-align:right'>{escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        notes = "".join(f"<li>{escape(n)}</li>" for n in self._notes())
        return (
            f"<table><caption style='text-align:left'><b>Ceilings</b>: {escape(self._title())}"
            f"</caption>{body}</table>" + (f"<ul>{notes}</ul>" if notes else "")
        )

    # -- the file format ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the cache's and the class reports' format)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in ("matmul_flops_per_s_by_dtype", "spread", "rounds"):
            d[name] = dict(d[name])
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ceilings:
        """The inverse of :meth:`to_dict`; unknown keys are an error (``TypeError``)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"ceilings must be a JSON object, got {type(data).__name__}")
        return cls(**data)


# ------------------------------------------------------------------ measuring


def measure_ceilings(
    device: str | torch.device | None = None, *, refresh: bool = False, progress: bool = True
) -> Ceilings:
    """Measure this machine's ceilings, or return them from the cache.

    The first call measures (~10-30 s on a 2-core laptop, a few seconds on a
    GPU; one progress line per step on stderr unless ``progress=False``) and
    caches the result as JSON in ``$BRRR_CACHE_DIR`` (default: the
    platform's cache folder, ``~/.cache/brrr`` on Linux). Later calls, in this process or another, read the
    cache. A cached result that was noisy is measured again once per process.
    ``refresh=True`` always measures. ``device`` defaults to
    :func:`brrrlib.device`; ``"cuda"`` and ``"cuda:0"`` share one entry.
    """
    dev = devices.physical(devices.resolve(device))
    devices.check_available(dev, "device")
    name = devices.device_name(dev)
    path = _cache_path(dev, name)
    if not refresh:
        found = _MEMO.get(path) or _load(path)
        if found is not None and (not found.noisy or path in _MEMO):
            _MEMO[path] = found
            return found
    ceilings = _measure(dev, name, progress)
    _MEMO[path] = ceilings
    _save(path, ceilings)
    return ceilings


#: This process's measurements, by cache path: a noisy one is not measured twice per process.
_MEMO: dict[Path, Ceilings] = {}


def _measure(dev: torch.device, name: str, progress: bool) -> Ceilings:
    say = _fmt.Progress(progress, total=4)
    say.say(f"measuring the ceilings of {dev} ({name}); cached afterwards")
    matmul, spread, rounds, n, cpu_share = {}, {}, {}, 0, 1.0
    methods = []
    for key in _precisions(dev):
        r = _matmul(dev, key)
        methods.append(f"{key} {r.extra['method']}")
        matmul[key] = r.value
        spread[_spread_key(key)], rounds[_spread_key(key)] = r.spread, r.rounds
        if key == "fp32":
            n, cpu_share = r.extra["n"], r.extra["cpu_share"]
    say("matmul: " + ", ".join(f"{k} {_fmt.si(v, 'FLOP/s')}" for k, v in matmul.items()))
    vector = _vector(dev)
    spread["vector"], rounds["vector"] = vector.spread, vector.rounds
    say(f"vector fp32: {_fmt.si(vector.value, 'FLOP/s')} ({vector.extra['method']})")
    bandwidth = _bandwidth(dev)
    spread["memory"], rounds["memory"] = bandwidth.spread, bandwidth.rounds
    say(f"memory bandwidth: {_fmt.si(bandwidth.value, 'B/s')} "
        f"(copy of {_fmt.binary_bytes(bandwidth.extra['nbytes'])})")  # fmt: skip
    overhead = _op_overhead(dev)
    spread["overhead"], rounds["overhead"] = overhead.spread, overhead.rounds
    say(f"op overhead (a.add_(b), 1 element): {_fmt.seconds(overhead.value)}")
    ceilings = Ceilings(
        device=dev.type, device_name=name,
        matmul_flops_per_s=matmul["fp32"], vector_flops_per_s=vector.value,
        mem_bandwidth_bytes_per_s=bandwidth.value, op_overhead_s=overhead.value,
        matmul_flops_per_s_by_dtype=matmul, spread=spread, rounds=rounds,
        cpu_share=cpu_share, num_threads=torch.get_num_threads(), matmul_size=n,
        copy_bytes=bandwidth.extra["nbytes"], vector_method=vector.extra["method"],
        matmul_method="; ".join(methods),
        torch_version=torch.__version__, library_version=_library_version(),
        host=socket.gethostname(),
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )  # fmt: skip
    for note in ceilings.noise_notes():
        say.say(f"NOISY: {note} (measure_ceilings(refresh=True) measures again)")
    return ceilings


@dataclass(frozen=True)
class _Rounds:
    """One ceiling: the median of its last rounds, their spread, how many rounds."""

    value: float
    spread: float
    rounds: int
    extra: Mapping[str, Any] = field(default_factory=dict)


def _in_rounds(
    call: Callable[[], Any], dev: torch.device, cap_s: float
) -> tuple[float, float, int]:
    """Seconds per ``call()``, measured in rounds until the last three agree within 10%.

    Each round is one short :func:`brrrlib.benchmark` (its median, with
    disturbed samples already dropped). Stops when the last three rounds'
    medians differ by at most 10% of their median, or when ``cap_s`` is
    spent (at least three rounds). Returns (the median of the last three,
    their spread (max - min) / median, the number of rounds).
    """
    round_s = 0.25 if dev.type == "cpu" else 0.1
    values: list[float] = []
    deadline = time.perf_counter() + cap_s
    while True:
        values.append(timing.benchmark(call, budget_s=round_s, warmup_s=0.0, device=dev).median_s)
        last = values[-3:]
        mid = _fmt.median(last)
        spread = (max(last) - min(last)) / mid
        if len(values) >= 3 and (spread <= SPREAD_LIMIT or time.perf_counter() > deadline):
            return mid, spread, len(values)


def _caps(dev: torch.device) -> dict[str, float]:
    """Seconds each ceiling may take when its rounds do not settle (a quiet machine needs ~1)."""
    if dev.type == "cpu":
        return {"matmul": 4.0, "other_matmul": 2.0, "vector": 2.0, "memory": 3.0, "overhead": 1.5}
    return {"matmul": 2.0, "other_matmul": 1.0, "vector": 1.0, "memory": 1.5, "overhead": 1.0}


def _precisions(dev: torch.device) -> tuple[str, ...]:
    if dev.type == "cuda":
        return PRECISIONS
    return ("fp32", "bf16", "fp16")  # TF32 is a GPU tensor-core format


def _spread_key(precision: str) -> str:
    return "matmul" if precision == "fp32" else f"matmul_{precision}"


def _matmul(dev: torch.device, precision: str) -> _Rounds:
    """The fastest square matmul PyTorch runs here, n doubled until a call lasts >= 1 ms (CPU).

    FLOPs = 2 n^3 (a multiply and an add per term). TF32 is fp32 inputs with
    ``torch.set_float32_matmul_precision("high")``. On a CPU PyTorch has two
    matmul libraries, and they can differ 2x: ``torch.mm`` calls the BLAS
    (MKL, which on AMD CPUs keeps to narrower vector code), while oneDNN
    (convolutions, LSTMs, ``torch.utils.mkldnn``'s linear) may use the
    widest vectors. Both are timed and the faster is the ceiling, so no
    kernel a model runs can beat it; ``matmul_method`` says which won.
    Calls stay short on a CPU (1-3 ms) so that a call another program
    disturbed can be told apart and dropped. A precision with no fast path
    (fp16 on most CPUs) is slow at any size, and that is worth knowing.
    """
    on_cpu = dev.type == "cpu"
    target_s, n, n_max = (0.001, 256, 4096) if on_cpu else (0.002, 2048, 8192)
    dtype = _DTYPES[precision]
    with _matmul_precision("high" if precision == "tf32" else "highest"):
        while True:
            a, b = (torch.randn(n, n, device=dev).to(dtype) for _ in range(2))
            c = torch.empty_like(a)
            one_s = _one_call_s(functools.partial(torch.mm, a, b, out=c), dev)
            if one_s >= target_s or n >= n_max:
                break
            n *= 2
        cpu0, wall0 = time.process_time(), time.perf_counter()
        cap = _caps(dev)["matmul" if precision == "fp32" else "other_matmul"]
        kernels = {"torch.mm": functools.partial(torch.mm, a, b, out=c)}
        if on_cpu:
            kernels.update(_onednn_linear(a, b))
        timed = {k: _in_rounds(call, dev, cap) for k, call in kernels.items()}
        wall = time.perf_counter() - wall0
        cpu_share = min(1.0, (time.process_time() - cpu0) / (wall * torch.get_num_threads()))
    best = min(timed, key=lambda k: timed[k][0])
    seconds, spread, rounds = timed[best]
    method = ", ".join(f"{k} {_fmt.si(2 * n**3 / v[0], 'FLOP/s')}" for k, v in timed.items())
    extra = {"n": n, "cpu_share": cpu_share if on_cpu else 1.0, "method": f"n={n}: {method}"}
    return _Rounds(2 * n**3 / seconds, spread, rounds, extra)


def _onednn_linear(a: torch.Tensor, b: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """oneDNN's linear on the same operands (``torch.utils.mkldnn``), if this build has it."""
    if not torch.backends.mkldnn.is_available():
        return {}
    try:
        from torch.utils import mkldnn

        n = a.shape[0]
        layer = torch.nn.Linear(n, n, bias=False, dtype=a.dtype)
        with torch.no_grad():
            layer.weight.copy_(b.t())
        onednn = mkldnn.to_mkldnn(layer, dtype=a.dtype)
        x = a.to_mkldnn()
        call = functools.partial(onednn, x)
        call()
        return {"oneDNN linear": call}
    except (RuntimeError, TypeError, ValueError):  # this dtype or build has no such path
        return {}


def _vector(dev: torch.device) -> _Rounds:
    """A ``torch.compile``'d chain of ``x = x * 0.999`` on in-cache data: multiplies per second.

    One eager ``x.mul_(y)`` waits on memory even in cache (1 FLOP per 8 bytes)
    and pays ~1 µs of dispatch. Fused, each element stays in a register for
    all 64 multiplies: 1 FLOP per element per multiply, as :func:`brrrlib.count`
    charges an elementwise op, and what chapter 02's repeat explorer runs.
    (Why 64: each multiply waits for the one before, so a CPU overlaps several
    elements' chains; on a 2-core EPYC 64 ran at 123 GFLOP/s, 256 at 82.) The tensor fits the L2 cache
    (CPU: 256 KiB per thread) or is large (GPU). If ``torch.compile`` fails,
    an eager ``torch.mul`` on in-cache data stands in (well below the peak;
    ``vector_method`` says so).
    """
    on_cpu = dev.type == "cpu"
    numel, steps = (2**16 * max(1, torch.get_num_threads()), 64) if on_cpu else (2**24, 64)
    x = torch.rand(numel, device=dev) + 1.0
    try:
        compiled = torch.compile(functools.partial(_multiply_chain, steps=steps), dynamic=False)
        call = functools.partial(compiled, x)
        call()
        devices.sync(dev)
        flops = numel * steps
        method = f"torch.compile: {steps} chained multiplies on {_fmt.binary_bytes(4 * numel)}"
    except Exception as err:  # any compiler failure (no C compiler, ...): fall back, say why
        first = str(err).strip().splitlines()[0][:80] if str(err).strip() else ""
        small = x[: 2**16].clone()
        call = functools.partial(torch.mul, small, 0.999, out=torch.empty_like(small))
        flops = small.numel()
        method = f"eager torch.mul, torch.compile failed ({type(err).__name__}: {first})"
    seconds, spread, rounds = _in_rounds(call, dev, _caps(dev)["vector"])
    return _Rounds(flops / seconds, spread, rounds, {"method": method})


def _multiply_chain(x: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = x * 0.999  # one FLOP per element; 0.999 keeps the numbers finite
    return x


def _bandwidth(dev: torch.device) -> _Rounds:
    """``dst.copy_(src)`` into a preallocated ``dst``, each twice the last-level cache.

    Bytes = read + written. ``src`` and ``dst`` are each twice the last-level
    cache (at least 64 MiB on a CPU, 512 MiB on a GPU), so every byte comes
    from memory (each as large as the cache read 63 GB/s instead of 42 on a
    2-core VM), yet one copy takes a few ms on a CPU, so a disturbed one can
    be dropped. Preallocated and touched first: a fresh allocation would
    page-fault on first touch (chapter 02 shows that cost on its own).
    """
    llc = devices.last_level_cache_bytes(dev)
    nbytes = max(2 * llc, 64 * 2**20) if dev.type == "cpu" else max(8 * llc, 512 * 2**20)
    src = torch.ones(nbytes // 4, device=dev)
    dst = torch.zeros_like(src)
    # A virtual machine's memory can run far above its sustained rate for a fraction of a
    # second once traffic starts (seen on a 2-core VM: ~90 GB/s for ~0.25 s, then ~45):
    # copy for half a second first, so the rounds see what a long op sustains.
    deadline = time.perf_counter() + (0.5 if dev.type == "cpu" else 0.05)
    while time.perf_counter() < deadline:
        dst.copy_(src)
        devices.sync(dev)
    seconds, spread, rounds = _in_rounds(
        functools.partial(dst.copy_, src), dev, _caps(dev)["memory"]
    )
    return _Rounds(2 * nbytes / seconds, spread, rounds, {"nbytes": nbytes})


def _op_overhead(dev: torch.device) -> _Rounds:
    """``a.add_(b)`` on one-element tensors: the cheapest form of a tiny op (no allocation).

    Measured in place, so it is a floor: ``a + b`` also allocates its
    output, and most ops do more. ``ops x op_overhead_s`` is then a lower
    bound on the host time of ``ops`` ops that do work.
    """
    a = torch.ones(1, device=dev)
    b = torch.zeros(1, device=dev)
    seconds, spread, rounds = _in_rounds(functools.partial(a.add_, b), dev, _caps(dev)["overhead"])
    return _Rounds(seconds, spread, rounds)


def _one_call_s(call: Callable[[], Any], dev: torch.device) -> float:
    """The best of three synced calls (the first may spin up threads or load kernels)."""
    best = math.inf
    for _ in range(3):
        devices.sync(dev)
        t0 = time.perf_counter()
        call()
        devices.sync(dev)
        best = min(best, time.perf_counter() - t0)
    return best


@contextlib.contextmanager
def _matmul_precision(value: str):
    """``torch.set_float32_matmul_precision`` for a block, then put back."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


# ------------------------------------------------------------------ the cache


def _library_version() -> str:
    from brrrlib import __version__

    return __version__


def _cache_path(dev: torch.device, device_name: str) -> Path:
    import re

    key = "-".join(
        [
            socket.gethostname(),
            device_name,
            str(dev),
            f"{torch.get_num_threads()}threads" if dev.type == "cpu" else "",
            f"torch{torch.__version__}",
            f"brrr{_library_version()}",
            f"method{_METHOD_VERSION}",
        ]
    )
    return _files.cache_dir() / ("ceilings-" + re.sub(r"[^A-Za-z0-9.]+", "_", key) + ".json")


def _load(path: Path) -> Ceilings | None:
    """A cached Ceilings; None (measure again) if the file is missing, stale or damaged."""
    try:
        return Ceilings.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


_WARNED_UNWRITABLE: set[Path] = set()


def _save(path: Path, ceilings: Ceilings) -> None:
    """Write through a unique temporary file, then rename: two kernels never mix their files.

    A cache that cannot be written costs nothing but the cache: the
    measurement is kept in memory for this process and one warning says why.
    """
    try:
        _files.write_atomic(path, json.dumps(ceilings.to_dict(), indent=2))
    except OSError as err:
        if path.parent not in _WARNED_UNWRITABLE:
            _WARNED_UNWRITABLE.add(path.parent)
            warnings.warn(
                f"brrr could not cache the ceilings in {path.parent} ({type(err).__name__}: "
                f"{err.strerror or err}); they are kept for this session only. Set "
                "BRRR_CACHE_DIR to a writable folder to keep them.",
                stacklevel=3,
            )
