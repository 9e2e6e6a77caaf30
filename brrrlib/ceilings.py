"""This machine's ceilings, measured: the factory, the trucks and the paperwork."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from brrrlib import _files, _fmt, hardware, machine, parts, timing

__all__ = ["Ceilings", "measure_ceilings"]

#: A ceiling whose last rounds differ by more than this fraction is "noisy".
SPREAD_LIMIT = 0.1
#: Bandwidth rounds whose fastest and slowest differ by more than this are "phases".
PHASE_LIMIT = 0.2
#: Below this share of its threads' CPU time during the matmul, the CPU was shared.
MIN_CPU_SHARE = 0.8
#: Below this share, too few undisturbed samples exist to drop the rest: the ceilings are noisy.
NOISY_CPU_SHARE = 0.5
#: A parallel op this many times slower on all threads than on one (and 1 ms or more) stalls.
STALL_RATIO = machine.STALL_RATIO
#: A round in which the hypervisor took more than this share of the CPUs' time is dropped.
STEAL_LIMIT = 0.05
#: A precision whose matmul peak is below this fraction of fp32's has no fast path here.
SLOW_PATH_RATIO = 0.8
#: A precision whose peak is above this multiple of fp32's is a fast path (tensor cores, AMX).
FAST_PATH_RATIO = 1.2
#: The matmul precisions, in the order tables list them.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
#: Chain lengths tried for the vector ceiling (each multiply waits for the one before).
VECTOR_CHAINS = (16, 32, 64)
#: Bandwidth and overhead rounds at least (more when the measurement is long).
_MIN_PHASE_ROUNDS = 6
#: Bumped whenever the way a ceiling is measured changes, so old cached files are not reused.
_METHOD_VERSION = 12


#: The fields of a Ceilings that hold a mapping, and those that hold a tuple of numbers.
_MAPPING_FIELDS = (
    "matmul_flops_per_s_by_dtype",
    "special_per_s",
    "spread",
    "rounds",
    "precision_notes",
    "bandwidth_by_form_bytes_per_s",
)
_TUPLE_FIELDS = ("bandwidth_rounds_bytes_per_s", "overhead_rounds_s")


@dataclass(frozen=True)
class Ceilings:
    """This machine's ceilings, measured (see :func:`measure_ceilings`)."""

    device: str
    device_name: str
    matmul_flops_per_s: float
    vector_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    op_overhead_s: float
    matmul_flops_per_s_by_dtype: Mapping[str, float] = field(default_factory=dict)
    special_per_s: Mapping[str, float] = field(default_factory=dict)
    spread: Mapping[str, float] = field(default_factory=dict)
    rounds: Mapping[str, int] = field(default_factory=dict)
    bandwidth_rounds_bytes_per_s: tuple[float, ...] = ()
    bandwidth_by_form_bytes_per_s: Mapping[str, float] = field(default_factory=dict)
    overhead_rounds_s: tuple[float, ...] = ()
    cpu_share: float = 1.0
    steal_share: float = 0.0
    parallel_op_s: float = 0.0
    parallel_op_one_thread_s: float = 0.0
    num_threads: int = 1
    matmul_size: int = 0
    copy_bytes: int = 0
    vector_method: str = ""
    matmul_method: str = ""
    precision_notes: Mapping[str, str] = field(default_factory=dict)
    kernels: str = ""
    attempts: int = 1
    torch_version: str = ""
    library_version: str = ""
    host: str = ""
    measured_at: str = ""

    def __post_init__(self) -> None:
        for name in (
            "matmul_flops_per_s",
            "vector_flops_per_s",
            "mem_bandwidth_bytes_per_s",
            "op_overhead_s",
        ):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (ok and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        by_dtype = {"fp32": self.matmul_flops_per_s, **dict(self.matmul_flops_per_s_by_dtype)}
        object.__setattr__(self, "matmul_flops_per_s_by_dtype", by_dtype)
        for name in _MAPPING_FIELDS:
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        for name in _TUPLE_FIELDS:
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))

    def __hash__(self) -> int:
        return hash((self.device, self.device_name, self.measured_at))

    # -- reading them ----------------------------------------------------------------
    def matmul_peak(self, precision: str = "fp32") -> float:
        """Matmul FLOP/s for ``precision`` ("fp32", "tf32", "bf16", "fp16")."""
        key = hardware.dtype_key(precision)
        if key not in self.matmul_flops_per_s_by_dtype:
            raise KeyError(
                f"no {key} matmul ceiling was measured on {self.device_name}; measured: "
                f"{', '.join(self.matmul_flops_per_s_by_dtype)}"
            )
        return self.matmul_flops_per_s_by_dtype[key]

    def bandwidth_for(self, pattern: str) -> float:
        """Bytes per second of a pattern's fastest round: ``"read"``, ``"copy"`` (into another tensor),
        ``"update"`` (in place) or ``"write"`` (the fastest writing form).
        """
        if pattern not in PATTERN_FORMS:
            raise ValueError(f"pattern={pattern!r}: choose one of {', '.join(PATTERN_FORMS)}")
        forms = self.bandwidth_by_form_bytes_per_s
        rates = [forms[f] for f in PATTERN_FORMS[pattern] if f in forms]
        return max(rates) if rates else self.mem_bandwidth_bytes_per_s

    def ridge_point_flops_per_byte(self, precision: str = "fp32") -> float:
        """FLOPs per byte a matmul of ``precision`` needs before memory stops setting the pace."""
        return self.matmul_peak(precision) / self.mem_bandwidth_bytes_per_s

    def fast_path(self, precision: str) -> bool:
        """True when ``precision``'s measured matmuls run at least 0.8x as fast as fp32's."""
        key = hardware.dtype_key(precision)
        peak = self.matmul_flops_per_s_by_dtype.get(key)
        return peak is not None and peak >= SLOW_PATH_RATIO * self.matmul_flops_per_s

    @property
    def fast_precision(self) -> str:
        """The precision whose matmuls run fastest here, if clearly faster than fp32, else "fp32"."""
        fp32 = self.matmul_flops_per_s
        best = max(self.matmul_flops_per_s_by_dtype.items(), key=lambda kv: kv[1])
        return best[0] if best[1] > FAST_PATH_RATIO * fp32 else "fp32"

    def precision_note(self, precision: str) -> str:
        """Why ``precision`` has no fast path here ("" when it has one, or was not measured)."""
        key = hardware.dtype_key(precision)
        if key not in self.matmul_flops_per_s_by_dtype or self.fast_path(key):
            return ""
        ratio = self.matmul_flops_per_s_by_dtype[key] / self.matmul_flops_per_s
        why = self.precision_notes.get(key, "")
        return f"{key} matmuls run at {_fmt.times(ratio)} fp32's speed here: no fast path" + (
            f" ({why})" if why else ""
        )

    def special_rate(self, function: str) -> float:
        """Evaluations per second of ``function`` ("exp", ...); for one not measured, the fastest
        measured (so a floor made from it stays a lower bound); the vector rate when none was
        measured.
        """
        if function in self.special_per_s:
            return self.special_per_s[function]
        return max(self.special_per_s.values(), default=self.vector_flops_per_s)

    @property
    def bandwidth_phases(self) -> bool:
        """True when the bandwidth rounds disagreed by more than 20%: the memory moved in phases."""
        return self.spread.get("memory", 0.0) > PHASE_LIMIT

    @property
    def noisy(self) -> bool:
        """True if a ceiling's rounds never agreed (see :meth:`noise_notes`)."""
        return bool(self.noise_notes())

    @property
    def shared_cpu(self) -> bool:
        """True when another program used the cores during the matmul (50% <= ``cpu_share`` < 80%)."""
        return self.device == "cpu" and NOISY_CPU_SHARE <= self.cpu_share < MIN_CPU_SHARE

    @property
    def stalls(self) -> bool:
        """True when a split op waited for a core another program holds (``settle_threads``)."""
        one = self.parallel_op_one_thread_s
        return one > 0 and self.parallel_op_s >= max(1e-3, STALL_RATIO * one)

    def noise_notes(self, uses: Iterable[str] | None = None) -> tuple[str, ...]:
        """One sentence per number to distrust, saying by how much."""
        wanted = set(self.spread) if uses is None else set(uses)
        notes = []
        if self.device == "cpu" and self.cpu_share < NOISY_CPU_SHARE:
            notes.append(
                f"this process got only {self.cpu_share:.0%} of its {self.num_threads} threads' "
                "CPU time: other programs kept the cores so busy that every number may read low "
                "(by up to the same factor); close them and measure again"
            )
        if self.stalls:
            notes.append(
                f"ops split over {self.num_threads} threads stall here: an in-place add on 2 MiB "
                f"took {_fmt.seconds(self.parallel_op_s)} on {self.num_threads} threads and "
                f"{_fmt.seconds(self.parallel_op_one_thread_s)} on one, because another program "
                "holds a core and each parallel op waits for it; every parallel op reads slow "
                "by up to that much. Close the other program, or run torch.set_num_threads(1)"
            )
        names = {
            "matmul": "fp32 matmul FLOP/s",
            "vector": "vector FLOP/s",
            "special": "special-function rates",
        }
        for key, value in self.spread.items():
            if key in ("memory", "overhead") or key not in wanted:
                continue
            if value > SPREAD_LIMIT:
                what = names.get(key, key.replace("matmul_", "") + " matmul FLOP/s")
                trust = (
                    f"trust it to ±{value:.0%}"
                    if value < 0.5
                    else "too noisy to trust; bl.measure_ceilings(refresh=True) when it is quiet"
                )
                notes.append(f"the {what} varied {value:.0%} between rounds: {trust}")
        fp32 = {"matmul", "vector"} & wanted
        if fp32 and self.device == "cpu" and self.matmul_flops_per_s < self.vector_flops_per_s:
            notes.append(
                f"the fp32 matmul ceiling ({_fmt.si(self.matmul_flops_per_s, 'FLOP/s')}) is below "
                f"the vector rate ({_fmt.si(self.vector_flops_per_s, 'FLOP/s')}), where a matmul "
                "(two FLOPs per multiply-add) runs faster: it was measured in a busy moment, and "
                "the ridge points and compute floors made from it read too low"
            )
        if self.bandwidth_phases and "memory" in wanted:
            hi = self.mem_bandwidth_bytes_per_s
            lo = min(self.bandwidth_rounds_bytes_per_s, default=hi * (1 - self.spread["memory"]))
            notes.append(
                f"memory bandwidth moved between {_fmt.si(lo, 'B/s')} and {_fmt.si(hi, 'B/s')} "
                "from round to round (a shared machine's phases): the ceiling is the fastest "
                "phase, and an op measured in a slow one reads below it"
            )
        return tuple(notes)

    def nearest_spec(self) -> hardware.DeviceSpec:
        """The spec-sheet row to set beside these measurements."""
        by_name = hardware.spec_for_device_name(self.device_name) if self.device == "cuda" else None
        if by_name is not None:
            return by_name

        def distance(s: hardware.DeviceSpec) -> float:
            return math.hypot(
                math.log(s.peak("fp32") / self.matmul_flops_per_s),
                math.log(s.mem_bandwidth_bytes_per_s / self.mem_bandwidth_bytes_per_s),
            )

        return min(hardware.all_specs(), key=distance)

    # -- rendering ----------------------------------------------------------------------
    def _rows(self) -> list[tuple[str, str]]:
        rows = []
        for k, v in self.matmul_flops_per_s_by_dtype.items():
            slow = (
                ""
                if self.fast_path(k)
                else f"  (no fast path: {_fmt.times(v / self.matmul_flops_per_s)} fp32)"
            )
            rows.append((f"matmul ({k})", _fmt.si(v, "FLOP/s") + slow))
        rows.append(("vector (fp32 multiplies)", _fmt.si(self.vector_flops_per_s, "FLOP/s")))
        if self.special_per_s:
            rows.append(
                (
                    "special functions",
                    ", ".join(f"{k} {_fmt.si(v, '/s')}" for k, v in self.special_per_s.items()),
                )
            )
        forms = self.bandwidth_by_form_bytes_per_s
        patterns = [p for p in ("read", "copy", "update") if set(PATTERN_FORMS[p]) & set(forms)]
        rows += [
            (f"memory: {p} ({_PATTERN_WORDS[p]})", _fmt.si(self.bandwidth_for(p), "B/s"))
            for p in patterns
        ] or [("memory bandwidth", _fmt.si(self.mem_bandwidth_bytes_per_s, "B/s"))]
        rows.append(("op overhead", _fmt.seconds(self.op_overhead_s)))
        return rows  # ridge points: the chapters work them out from these numbers

    def _title(self) -> str:
        threads = f", {self.num_threads} threads" if self.device == "cpu" else ""
        kernels = f", {self.kernels} kernels" if self.kernels else ""
        noisy = " NOISY (see notes)" if self.noisy else ""
        return (
            f"{self.device} ({self.device_name}{threads}{kernels}), "
            f"measured {self.measured_at[:16]}{noisy}"
        )

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        lines = [f"Ceilings: {self._title()}"]
        lines += [f"  {k:<{width}}  {v}" for k, v in self._rows()]
        lines += [f"  note: {n}" for n in self._notes()]
        return "\n".join(lines)

    def _notes(self) -> list[str]:
        notes = list(self.noise_notes())
        notes += filter(None, map(self.precision_note, self.matmul_flops_per_s_by_dtype))
        if self.shared_cpu:
            notes.append(
                f"another program used the cores meanwhile (this process got {self.cpu_share:.0%} "
                f"of its {self.num_threads} threads' CPU time); the samples it disturbed were "
                "dropped and replaced"
            )
        if self.steal_share > STEAL_LIMIT:
            notes.append(
                f"the hypervisor took up to {self.steal_share:.0%} of the CPUs' time in a round "
                "(steal time, /proc/stat); those rounds were dropped"
            )
        if self.spread.get("overhead", 0.0) > SPREAD_LIMIT:
            notes.append(
                f"op overhead: its rounds ranged over {self.spread['overhead']:.0%}; the floor "
                "is the fastest round"
            )
        return notes

    def _repr_html_(self) -> str:
        from html import escape

        notes = "".join(f"<li>{escape(n)}</li>" for n in self._notes())
        return (
            f"<p><b>Ceilings</b>: {escape(self._title())}</p>"
            + _fmt.html_table((), self._rows(), align="lr")
            + (f"<ul>{notes}</ul>" if notes else "")
        )

    # -- the file format ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the cache's and the class reports' format)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            **d,
            **{name: dict(d[name]) for name in _MAPPING_FIELDS},
            **{name: list(d[name]) for name in _TUPLE_FIELDS},
        }

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
    """Measure this machine's ceilings, or return them from the cache."""
    dev = machine.physical(machine.resolve(device))
    machine.check_available(dev, "device")
    if dev.type == "cpu":  # before the cache, which is keyed by the thread count
        machine.settle_threads()
    name = machine.device_name(dev)
    path = _cache_path(dev, name)
    found = None if refresh else (_MEMO.get(path) or _load(path))
    if found is not None and path not in _MEMO and _beaten(found, dev):
        found = None  # measured at a slower moment than this one: not this machine's ceiling
    if found is not None and (not found.noisy or path in _MEMO or found.attempts >= 2):
        _MEMO[path] = found
        return found
    ceilings = _measure(dev, name, progress)
    if found is not None:  # a noisy cached result, measured once more: keep the quieter
        ceilings = min((ceilings, found), key=lambda c: (len(c.noise_notes()), -c.cpu_share))
        ceilings = dataclasses.replace(ceilings, attempts=found.attempts + 1)
    _MEMO[path] = ceilings
    _save(path, ceilings)
    return ceilings


#: This process's measurements, by cache path: a noisy one is not measured twice per process.
_MEMO: dict[Path, Ceilings] = {}


def _measure(dev: torch.device, name: str, progress: bool) -> Ceilings:
    """Each ceiling in turn, with a bandwidth and an overhead round after each (their phases)."""
    precisions = _precisions(dev)
    say = _fmt.Progress(progress, total=len(precisions) + 3)
    say.say(f"measuring the ceilings of {dev} ({name}); cached afterwards")
    phases = _Phases(dev)
    found = {}
    for key in precisions:
        found[key] = _matmul(dev, key)
        say(f"matmul {key}: {_fmt.si(found[key].value, 'FLOP/s')} ({found[key].extra['method']})")
        phases.round()
    vector = _vector(dev)
    if dev.type == "cpu" and found["fp32"].value < vector.value:  # a busy moment (see _matmul)
        again = _matmul(dev, "fp32")
        say.say(f"matmul fp32 read below the vector rate; again: {_fmt.si(again.value, 'FLOP/s')}")
        found["fp32"] = max(found["fp32"], again, key=lambda r: r.value)
    matmul = _check_physics(dev, {key: r.value for key, r in found.items()}, vector.value)
    say(f"vector fp32: {_fmt.si(vector.value, 'FLOP/s')} ({vector.extra['method']})")
    phases.round()
    special, special_spread, special_method = _special(dev)
    say("special functions: " + ", ".join(f"{k} {_fmt.si(v, '/s')}" for k, v in special.items()))
    while len(phases.bandwidth_s) < _MIN_PHASE_ROUNDS:
        phases.round()
    bandwidth, overhead = phases.bandwidth(), phases.overhead()
    each = {_spread_key(key): r for key, r in found.items()}
    each.update(vector=vector, special=_Rounds(0, special_spread, 3), memory=bandwidth)
    each["overhead"] = overhead
    spread, rounds = {k: r.spread for k, r in each.items()}, {k: r.rounds for k, r in each.items()}
    say(
        f"memory bandwidth {_fmt.si(bandwidth.value, 'B/s')} (fastest of {bandwidth.rounds} "
        f"rounds, {_fmt.binary_bytes(phases.nbytes)} each); op overhead "
        f"{_fmt.seconds(overhead.value)} (a.add_(b), 1 element)"
    )
    ceilings = Ceilings(
        device=dev.type,
        device_name=name,
        matmul_flops_per_s=matmul["fp32"],
        vector_flops_per_s=vector.value,
        mem_bandwidth_bytes_per_s=bandwidth.value,
        op_overhead_s=overhead.value,
        matmul_flops_per_s_by_dtype=matmul,
        special_per_s=special,
        spread=spread,
        rounds=rounds,
        bandwidth_rounds_bytes_per_s=bandwidth.extra["rounds"],
        bandwidth_by_form_bytes_per_s=phases.by_form,
        overhead_rounds_s=overhead.extra["rounds"],
        cpu_share=found["fp32"].extra["cpu_share"],
        steal_share=phases.steal_share,
        **_parallel_op(dev),
        num_threads=torch.get_num_threads(),
        matmul_size=found["fp32"].extra["n"],
        copy_bytes=phases.nbytes,
        vector_method=f"{vector.extra['method']}; special: {special_method}",
        matmul_method="; ".join(f"{key} {r.extra['method']}" for key, r in found.items()),
        precision_notes=_precision_notes(matmul, dev),
        **_provenance(dev),
    )
    for note in ceilings.noise_notes():
        say.say(f"note: {note} (measure_ceilings(refresh=True) measures again)")
    return ceilings


def _check_physics(dev: torch.device, matmul: dict[str, float], vector: float) -> dict[str, float]:
    """``matmul`` back, unless an fp32 rate needs a clock no core has (a timing bug): refused."""
    found = parts.cpu_parts(torch.get_num_threads()) if dev.type == "cpu" else None
    for name, rate, per_lane in (("matmul fp32", matmul["fp32"], 2), ("vector fp32", vector, 1)):
        clock = found.implied_clock_hz(rate, per_lane) if found else 0.0
        if clock > parts.MAX_CLOCK_HZ:
            raise RuntimeError(
                f"measure_ceilings: {name} measured {_fmt.si(rate, 'FLOP/s')}, which needs "
                f"{clock / 1e9:.1f} GHz on this CPU's parts ({found}); no core runs that fast, "
                "so the timing was wrong and nothing was cached. Measure again with "
                "bl.measure_ceilings(refresh=True); if it repeats, report it with brrr doctor's "
                "output."
            )
    return matmul


def _precision_notes(matmul: Mapping[str, float], dev: torch.device) -> dict[str, str]:
    """Why each precision well below fp32's matmul rate is slow here, from what the CPU and torch
    report (:func:`precision_reason`).
    """
    slow = [k for k in matmul if k != "fp32" and matmul[k] < SLOW_PATH_RATIO * matmul["fp32"]]
    flags = machine.cpu_flags() if dev.type == "cpu" else frozenset()
    told = {
        k: v for k, v in os.environ.items() if k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
    }
    return {k: precision_reason(k, dev.type, flags, _kernels(dev), told) for k in slow}


def _provenance(dev: torch.device) -> dict[str, str]:
    """Where and with what the ceilings were measured: kernels, versions, host, time."""
    return {
        "kernels": _kernels(dev),
        "torch_version": torch.__version__,
        "library_version": _library_version(),
        "host": socket.gethostname(),
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


@dataclass(frozen=True)
class _Rounds:
    """One ceiling: its value, how much its rounds differed, how many rounds."""

    value: float
    spread: float
    rounds: int
    extra: Mapping[str, Any] = field(default_factory=dict)


def _in_rounds(
    call: Callable[[], Any], dev: torch.device, cap_s: float
) -> tuple[float, float, int]:
    """Seconds per ``call()``: short benchmarks' medians until the last three agree within 10% or
    ``cap_s`` is spent.
    """
    round_s = 0.25 if dev.type == "cpu" else 0.1
    values: list[float] = []
    deadline = time.perf_counter() + cap_s
    while True:
        values.append(_quick_s(call, dev, round_s))
        last = values[-3:]
        mid = _fmt.median(last)
        spread = (max(last) - min(last)) / mid
        if len(values) >= 3 and (spread <= SPREAD_LIMIT or time.perf_counter() > deadline):
            return mid, spread, len(values)


def _caps(dev: torch.device) -> dict[str, float]:
    """Seconds each ceiling may take when its rounds do not settle (a quiet machine needs ~1)."""
    if dev.type == "cpu":
        return {"matmul": 3.0, "other_matmul": 1.5, "vector": 1.5}
    return {"matmul": 2.0, "other_matmul": 1.0, "vector": 1.0}


def _precisions(dev: torch.device) -> tuple[str, ...]:
    if dev.type == "cuda":
        return PRECISIONS
    return ("fp32", "bf16", "fp16")  # TF32 is a GPU tensor-core format


def _spread_key(precision: str) -> str:
    return "matmul" if precision == "fp32" else f"matmul_{precision}"


# ------------------------------------------------------------------ matmul


def _matmul(dev: torch.device, precision: str) -> _Rounds:
    """The fastest matmul PyTorch runs here in ``precision`` (FLOPs = 2 n^3; TF32 is fp32 with
    ``torch.set_float32_matmul_precision("high")``).
    """
    on_cpu = dev.type == "cpu"
    target_s, n, n_max = (0.001, 256, 4096) if on_cpu else (0.002, 2048, 8192)
    budget_s = (6.0 if precision == "fp32" else 3.0) if on_cpu else 2.0  # for the screen
    dtype = _DTYPES[precision]
    screened: dict[tuple[str, int], tuple[Callable[[], Any], float]] = {}
    with _matmul_precision("high" if precision == "tf32" else "highest"):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        alive, rates = None, [0.0, 0.0]  # the rates of the last two sizes
        while True:  # 1. screen
            kernels = _matmul_kernels(n, dtype, dev)
            alive = set(kernels) if alive is None else alive
            for name in alive & set(kernels):
                screened[(name, n)] = (kernels[name], _quick_s(kernels[name], dev))
            times = {name: screened[(name, n)][1] for name in alive}
            fastest = min(times.values(), default=math.inf)
            alive = {name for name, t in times.items() if t < 4 * fastest}
            rate = 2 * n**3 / fastest
            # settled: two doublings in a row gained under a quarter (a CPU's bf16 matmul read
            # 1.1 TFLOP/s at n = 512 and 1024, then 2.5 at 2048)
            flat = rate < 1.25 * rates[-1] and rates[-1] < 1.25 * rates[-2]
            settled = all(t >= target_s for t in times.values()) and flat
            next_s = 3 * 8 * sum(times[name] for name in alive)  # 3 samples each at 2n
            left_s = budget_s - (time.perf_counter() - wall0)
            if not alive or settled or n >= n_max or next_s > left_s:
                break
            n, rates = 2 * n, [rates[-1], rate]
        (kernel, size), (call, screen_s) = min(
            screened.items(), key=lambda kv: kv[1][1] / kv[0][1] ** 3
        )
        cap = _caps(dev)["matmul" if precision == "fp32" else "other_matmul"]
        seconds, spread, rounds = _in_rounds(call, dev, cap)  # 2. rounds on the fastest
        wall = time.perf_counter() - wall0
        cpu_share = min(1.0, (time.process_time() - cpu0) / (wall * torch.get_num_threads()))
    best = {}
    for (name, s), (_, t) in screened.items():
        best[name] = max(best.get(name, (0.0, 0)), (2 * s**3 / t, s))
    method = ", ".join(f"{k} {_fmt.si(r, 'FLOP/s')} (n={s})" for k, (r, s) in best.items())
    extra = {
        "n": size,
        "cpu_share": cpu_share if on_cpu else 1.0,
        "method": f"{kernel} at n={size}; screened: {method}",
    }
    return _settled(2 * size**3 / seconds, 2 * size**3 / screen_s, spread, rounds, extra)


def _settled(rounds_rate: float, screen_rate: float, spread: float, rounds: int, extra) -> _Rounds:
    """The faster of rounds and screen; rounds far below the screen count as spread (a busy machine's
    rounds can agree on a stalled rate).
    """
    best = max(rounds_rate, screen_rate)
    return _Rounds(best, max(spread, 1 - rounds_rate / best), rounds, extra)


def _matmul_kernels(n: int, dtype: torch.dtype, dev: torch.device) -> dict[str, Callable[[], Any]]:
    """The matmul kernels a model runs, on the same square operands."""
    a, b = (torch.randn(n, n, device=dev).to(dtype) for _ in range(2))
    out = torch.empty_like(a)
    kernels = {
        "torch.mm": functools.partial(torch.mm, a, b, out=out),
        "F.linear": functools.partial(torch.nn.functional.linear, a, b),
    }
    if dev.type == "cpu":
        kernels.update(_onednn_linear(a, b))
    return kernels


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


def _kernels(dev: torch.device) -> str:
    """Which vector kernels torch dispatches to on a CPU ("AVX512", "AVX2", ...); "" elsewhere."""
    return str(torch.backends.cpu.get_cpu_capability()) if dev.type == "cpu" else ""


#: The matrix instructions of a precision, and the CPU flags (Linux names: x86, ARM) that say so.
_MATRIX_FLAGS = {
    "bf16": ("bf16 matrix instructions (AVX-512 BF16 or AMX)", ("avx512_bf16", "amx_bf16", "bf16")),
    "fp16": ("fp16 matrix instructions (AVX-512 FP16 or AMX-FP16)", ("avx512_fp16", "amx_fp16")),
}


def precision_reason(
    precision: str,
    device_type: str,
    flags: frozenset[str],
    kernels: str,
    overrides: Mapping[str, str],
) -> str:
    """Why a precision measured slower than fp32 (pure: the inputs are what the machine says)."""
    if device_type != "cpu":
        return f"this device has no {precision} units faster than its fp32 ones"
    if overrides:
        told = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        return f"torch was told to use narrower kernels ({told})"
    what, wanted = _MATRIX_FLAGS.get(precision, (precision, ()))
    if flags and not any(f in flags for f in wanted):
        return f"this CPU has no {what}, so torch converts to fp32 and back"
    if flags:
        return (
            f"the CPU has them ({', '.join(f for f in wanted if f in flags)}), but this torch "
            f"({kernels or 'unknown'} kernels) does not use them for this matmul"
        )
    return f"no {precision} matrix instructions that torch uses here"


# ------------------------------------------------------------------ vector and special


def _vector(dev: torch.device) -> _Rounds:
    """``torch.compile``'d chains of ``x = x * 0.999`` on in-cache data: multiplies per second."""
    on_cpu = dev.type == "cpu"
    numel = 2**17 * max(1, torch.get_num_threads()) if on_cpu else 2**24
    x = torch.rand(numel, device=dev) + 1.0
    try:
        rates = {}
        for steps in VECTOR_CHAINS:
            compiled = torch.compile(functools.partial(_multiply_chain, steps=steps), dynamic=False)
            call = functools.partial(compiled, x)
            call()
            rates[steps] = (call, numel * steps / _quick_s(call, dev))
        steps = max(rates, key=lambda k: rates[k][1])
        call, flops, screen_rate = rates[steps][0], numel * steps, rates[steps][1]
        tried = ", ".join(f"{k}: {_fmt.si(v[1], 'FLOP/s')}" for k, v in rates.items())
        method = (
            f"torch.compile, {steps} chained multiplies on {_fmt.binary_bytes(4 * numel)} ({tried})"
        )
    except Exception as err:  # any compiler failure (no C compiler, ...): fall back, say why
        first = str(err).strip().splitlines()[0][:80] if str(err).strip() else ""
        small = x[: 2**16].clone()
        call = functools.partial(torch.mul, small, 0.999, out=torch.empty_like(small))
        flops, screen_rate = small.numel(), 0.0
        method = f"eager torch.mul, torch.compile failed ({type(err).__name__}: {first})"
    seconds, spread, rounds = _in_rounds(call, dev, _caps(dev)["vector"])
    return _settled(flops / seconds, screen_rate, spread, rounds, {"method": method})


def _multiply_chain(x: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = x * 0.999  # one FLOP per element; 0.999 keeps the numbers finite
    return x


#: Eager ops that evaluate each special function once per element. ``torch.exp`` and its kin
#: may call a vendor library's high-accuracy routine (MKL's on x86 builds), while composite
#: kernels (sigmoid, gelu) carry their own vectorized one, several times faster: the fastest
#: of them is the rate, so a floor made from it stays a lower bound for eager ops.
_SPECIAL_OPS: Mapping[str, tuple[tuple[str, Callable[..., Any]], ...]] = {
    "exp": (("torch.exp", torch.exp), ("torch.sigmoid", torch.sigmoid)),
    "tanh": (
        ("torch.tanh", torch.tanh),
        ("gelu, tanh form", functools.partial(torch.ops.aten.gelu.out, approximate="tanh")),
    ),
    "erf": (("torch.erf", torch.erf), ("gelu", torch.ops.aten.gelu.out)),
    "cos": (("torch.cos", torch.cos), ("torch.sin", torch.sin)),
    "log": (("torch.log", torch.log), ("torch.log1p", torch.log1p)),
}


def _special(dev: torch.device) -> tuple[dict[str, float], float, str]:
    """Evaluations per second of each special function, eager, on data in cache."""
    numel = (
        2**18 * max(1, torch.get_num_threads())
        if dev.type == "cpu"
        else (machine.last_level_cache_bytes(dev) // 16)
    )
    x = torch.rand(numel, device=dev) + 0.5  # in (0.5, 1.5): every function finite
    out = torch.empty_like(x)
    rates, spread, won = {}, 0.0, []
    for name, ops in _SPECIAL_OPS.items():
        best = {}
        for label, op in ops:
            call = functools.partial(op, x, out=out)
            call()
            best[label] = sorted(_quick_s(call, dev) for _ in range(3))
        label = min(best, key=lambda k: best[k][0])
        times = best[label]
        rates[name] = numel / times[0]
        spread = max(spread, (times[-1] - times[0]) / times[-1])
        won.append(f"{name} by {label}")
    return rates, spread, ", ".join(won)


# ------------------------------------------------------------------ bandwidth and overhead


#: The passes each round of :class:`_Phases` times that write (8 bytes per fp32 element).
_WRITE_FORMS = ("copy_", "add_ (in place)", "add(out=)")
#: Each access pattern and the forms that measure it (``Ceilings.bandwidth_for``).
PATTERN_FORMS = {
    "read": ("sum (read)", "dot (read)"),
    "copy": ("copy_", "add(out=)"),
    "update": ("add_ (in place)",),
    "write": _WRITE_FORMS,
}


#: How each pattern reads in the repr.
_PATTERN_WORDS = {
    "read": "x.sum(), a dot",
    "copy": "into another tensor",
    "update": "in place",
}


class _Phases:
    """Bandwidth and overhead rounds, taken between the other ceilings (see the module doc)."""

    def __init__(self, dev: torch.device) -> None:
        # The in-place form touches one buffer, not two: at twice the cache it still ran
        # from cache (~170 GB/s against ~70 streamed on a 2-core VM with a 32 MiB L3).
        # Eight times the largest cache, and no less than 256 MiB, streams from memory, but
        # no more than a sixteenth of the free memory each (a power of two: the chapters
        # reshape it): chapter 02 streams tensors of this size, several at once (a 480 MiB
        # L3 asked for 3.8 GB each, and its kernel outgrew a 24 GB machine).
        llc = machine.last_level_cache_bytes(dev)
        floor = 256 * 2**20 if dev.type == "cpu" else 512 * 2**20
        room = 2 ** int(math.log2(max(machine.available_memory_bytes(dev) // 16, 1)))
        self.nbytes = max(64 * 2**20, min(max(8 * llc, floor), room))
        self.dev = dev
        src = torch.ones(self.nbytes // 4, device=dev)
        dst = torch.zeros_like(src)
        zero = torch.zeros(1, device=dev)
        self.forms = {
            "copy_": functools.partial(dst.copy_, src),
            "add_ (in place)": functools.partial(src.add_, zero),
            "add(out=)": functools.partial(torch.add, src, zero, out=dst),
            "sum (read)": src.sum,
            # the two halves' dot product: every byte read once, through the BLAS kernels a
            # matrix-vector product uses (faster than sum's reduction on some CPUs)
            "dot (read)": functools.partial(torch.dot, *src.chunk(2)),
        }
        a, b = torch.ones(1, device=dev), torch.zeros(1, device=dev)
        self.tiny = functools.partial(a.add_, b)
        # A virtual machine's memory can run far above its sustained rate for a fraction of
        # a second once traffic starts (seen on a 2-core VM: ~90 GB/s for ~0.25 s, then ~45):
        # copy for a moment first, so the rounds see what a long op sustains.
        deadline = time.perf_counter() + (0.3 if dev.type == "cpu" else 0.05)
        while time.perf_counter() < deadline:
            self.forms["copy_"]()
            machine.sync(dev)
        self.bandwidth_s: list[tuple[float, float]] = []  # (bytes/s, steal share) per round
        self.overhead_s: list[tuple[float, float]] = []
        self.by_form: dict[str, float] = {}  # each form's fastest round, bytes/s

    def round(self) -> None:
        budget = 0.06 if self.dev.type == "cpu" else 0.03
        before = _steal_ticks()
        rates = {}
        for form, f in self.forms.items():  # a read moves nbytes, the others read and write
            moved = (2 if form in _WRITE_FORMS else 1) * self.nbytes
            rates[form] = moved / _quick_s(f, self.dev, budget)
        steal = _steal_share(before, _steal_ticks())
        self.bandwidth_s.append((max(rates[f] for f in _WRITE_FORMS), steal))
        if steal <= STEAL_LIMIT or not self.by_form:
            for form, rate in rates.items():
                self.by_form[form] = max(self.by_form.get(form, 0.0), rate)
        before = _steal_ticks()
        t = timing.benchmark(self.tiny, budget_s=2 * budget, warmup_s=0.0, device=self.dev)
        self.overhead_s.append((t.median_s, _steal_share(before, _steal_ticks())))

    @property
    def steal_share(self) -> float:
        return max((s for _, s in self.bandwidth_s + self.overhead_s), default=0.0)

    @staticmethod
    def _kept(values: list[tuple[float, float]]) -> list[float]:
        quiet = [v for v, steal in values if steal <= STEAL_LIMIT]
        return quiet or [v for v, _ in values]

    def bandwidth(self) -> _Rounds:
        """The fastest phase, and how far the slowest fell below it (a fraction of it)."""
        return self._phase(self.bandwidth_s, max)

    def overhead(self) -> _Rounds:
        """The cheapest round (a floor), and how far the dearest rose above it."""
        return self._phase(self.overhead_s, min)

    def _phase(self, values: list[tuple[float, float]], pick: Callable[..., float]) -> _Rounds:
        kept = self._kept(values)
        best = pick(kept)
        return _Rounds(best, (max(kept) - min(kept)) / best, len(kept), {"rounds": tuple(kept)})


def _beaten(found: Ceilings, dev: torch.device) -> bool:
    """True (and said) when a same-run fp32 ``torch.mm`` at the cached ceiling's size beats it by more
    than its spread: the cache was measured at a busier moment than this one.
    """
    n = found.matmul_size
    if not n or found.device != dev.type:
        return False
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    now = 2 * n**3 / _quick_s(functools.partial(torch.mm, a, b), dev, 0.1)
    margin = 1 + max(found.spread.get("matmul", 0.0), SPREAD_LIMIT)
    if now <= margin * found.matmul_flops_per_s:
        return False
    print(
        f"a same-run fp32 torch.mm at n = {n} read {_fmt.si(now, 'FLOP/s')}, above the cached "
        f"ceiling's {_fmt.si(found.matmul_flops_per_s, 'FLOP/s')} by more than its spread "
        f"({margin - 1:.0%}): the cache was measured at a busier moment; measuring again"
    )
    return True


def _parallel_op(dev: torch.device) -> dict[str, float]:
    """Seconds of an in-place add on 2 MiB (16 of torch's 32,768-element grains, so split over the
    threads) on all threads, then on one, as Ceilings fields (none on a GPU or one thread).
    """
    threads = torch.get_num_threads()
    if dev.type != "cpu" or threads < 2:
        return {}
    x, zero = torch.ones(2**19), torch.zeros(1)
    add = functools.partial(x.add_, zero)
    parallel_s = _quick_s(add, dev)
    torch.set_num_threads(1)
    try:
        return {"parallel_op_s": parallel_s, "parallel_op_one_thread_s": _quick_s(add, dev)}
    finally:
        torch.set_num_threads(threads)


def _steal_ticks() -> tuple[int, int] | None:
    """(steal, total) clock ticks of all CPUs so far, from /proc/stat; None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(v) for v in fields[1:]]
    return ticks[7], sum(ticks[:8])  # steal is the 8th column; guest time is already in user


def _steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """The share of the CPUs' time the hypervisor took between two readings (0 if unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return (after[0] - before[0]) / (after[1] - before[1])


def _quick_s(call: Callable[[], Any], dev: torch.device, budget_s: float = 0.03) -> float:
    """A short benchmark's median (disturbed samples dropped), no warm-up, 3 samples at least."""
    return timing.benchmark(
        call, budget_s=budget_s, warmup_s=0.0, device=dev, min_samples=3
    ).median_s


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
            _kernels(dev),
            os.environ.get("ONEDNN_MAX_CPU_ISA", "") if dev.type == "cpu" else "",
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
    """Write the cache file; one that cannot be written costs the cache only (one warning)."""
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
