"""This machine's ceilings, measured: the factory, the trucks and the paperwork."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import importlib
import json
import math
import os
import re
import socket
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from brrrlib import _checks, _files, _fmt, hardware, machine, parts, timing

__all__ = ["Ceilings", "measure_ceilings"]

#: A ceiling whose typical round fell more than this fraction below its best is "noisy".
SPREAD_LIMIT = 0.1
#: From this spread on, a ceiling is too noisy to trust at all.
UNTRUSTED_SPREAD = 0.5
#: A precision whose matmul peak is below this fraction of fp32's has no fast path here.
SLOW_PATH_RATIO = 0.8
#: A precision whose peak is above this multiple of fp32's is a fast path (tensor cores, AMX).
FAST_PATH_RATIO = 1.2
#: The matmul precisions, in the order tables list them.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
_DTYPES = dict(fp32=torch.float32, tf32=torch.float32, bf16=torch.bfloat16, fp16=torch.float16)
#: Chain lengths tried for the vector ceiling (each multiply waits for the one before).
VECTOR_CHAINS = (16, 32, 64)
#: Spaced rounds: every ceiling's kernel once per round; each ceiling is its best round.
ROUNDS = 6
#: Bumped whenever the way a ceiling is measured changes, so old cached files are not reused.
_METHOD_VERSION = 15


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
    spread: Mapping[str, float] = field(default_factory=dict)  # 1 - best / median round
    rounds: Mapping[str, int] = field(default_factory=dict)
    bandwidth_rounds_bytes_per_s: tuple[float, ...] = ()
    bandwidth_by_form_bytes_per_s: Mapping[str, float] = field(default_factory=dict)
    overhead_rounds_s: tuple[float, ...] = ()
    cpu_share: float = 1.0
    num_threads: int = 1
    # read from files written before method 15 (recordings, class reports); no longer measured
    attempts: int = 1
    steal_share: float = 0.0
    parallel_op_s: float = 0.0
    parallel_op_one_thread_s: float = 0.0
    matmul_size: int = 0
    copy_bytes: int = 0
    vector_method: str = ""
    matmul_method: str = ""
    precision_notes: Mapping[str, str] = field(default_factory=dict)
    kernels: str = ""
    torch_version: str = ""
    library_version: str = ""
    host: str = ""
    measured_at: str = ""

    def __post_init__(self) -> None:
        for name in [f.name for f in dataclasses.fields(self)][2:6]:  # the four ceilings
            _checks.number(name, getattr(self, name), positive=True, finite=True)
        by_dtype = {"fp32": self.matmul_flops_per_s, **dict(self.matmul_flops_per_s_by_dtype)}
        object.__setattr__(self, "matmul_flops_per_s_by_dtype", by_dtype)
        # older files add the pattern to a form's name, sum (read): the name is its first word
        forms = {k.split()[0]: v for k, v in self.bandwidth_by_form_bytes_per_s.items()}
        object.__setattr__(self, "bandwidth_by_form_bytes_per_s", forms)
        for f in dataclasses.fields(self):  # mappings read-only, tuples of floats (JSON: lists)
            value = getattr(self, f.name)
            if f.default_factory is dict:
                object.__setattr__(self, f.name, MappingProxyType(dict(value)))
            elif f.default == ():
                object.__setattr__(self, f.name, tuple(float(v) for v in value))

    def __hash__(self) -> int:
        return hash((self.device, self.device_name, self.measured_at))

    def matmul_peak(self, precision: str = "fp32") -> float:
        """Matmul FLOP/s for ``precision`` ("fp32", "tf32", "bf16", "fp16")."""
        key = hardware.dtype_key(precision)
        return self.matmul_flops_per_s_by_dtype[
            _checks.one_of("precision", key, self.matmul_flops_per_s_by_dtype)
        ]

    def bandwidth_for(self, pattern: str) -> float:
        """Bytes per second of ``pattern``'s fastest form: "read", "copy", "update" or "write"."""
        _checks.one_of("pattern", pattern, PATTERN_FORMS)
        forms = self.bandwidth_by_form_bytes_per_s
        rates = [forms[f] for f in PATTERN_FORMS[pattern] if f in forms]
        return max(rates) if rates else self.mem_bandwidth_bytes_per_s

    def ridge_point_flops_per_byte(self, precision: str = "fp32") -> float:
        """FLOPs per byte a matmul of ``precision`` needs before memory stops setting the pace."""
        return self.matmul_peak(precision) / self.mem_bandwidth_bytes_per_s

    def fast_path(self, precision: str) -> bool:
        """True when ``precision``'s measured matmuls run at least 0.8x as fast as fp32's."""
        peak = self.matmul_flops_per_s_by_dtype.get(hardware.dtype_key(precision))
        return peak is not None and peak >= SLOW_PATH_RATIO * self.matmul_flops_per_s

    @property
    def fast_precision(self) -> str:
        """The precision whose matmuls run fastest here, if clearly faster than fp32, else "fp32"."""
        best = max(self.matmul_flops_per_s_by_dtype.items(), key=lambda kv: kv[1])
        return best[0] if best[1] > FAST_PATH_RATIO * self.matmul_flops_per_s else "fp32"

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
        """Evaluations per second of ``function`` ("exp", ...), else the fastest measured."""
        if function in self.special_per_s:
            return self.special_per_s[function]
        return max(self.special_per_s.values(), default=self.vector_flops_per_s)

    @property
    def noisy(self) -> bool:
        """True if a ceiling's rounds disagreed, or the CPU was shared (see :meth:`noise_notes`)."""
        return bool(self.noise_notes())

    def noise_notes(self, uses: Iterable[str] | None = None) -> tuple[str, ...]:
        """One note per number to distrust (of the spread keys in ``uses``; all by default)."""
        wanted = set(self.spread) if uses is None else set(uses)
        waited = timing.waited_caveat(self.cpu_share) if self.device == "cpu" else ""
        spread = [
            f"{k} rounds varied {_spread(v)}"
            for k, v in self.spread.items()
            if k in wanted and v > SPREAD_LIMIT
        ]
        return tuple(filter(None, [waited, *spread]))

    def nearest_spec(self) -> hardware.DeviceSpec:
        """The spec-sheet row to set beside these measurements."""
        by_name = hardware.spec_for_device_name(self.device_name) if self.device == "cuda" else None
        return by_name or min(  # else the nearest in log(matmul) and log(bandwidth)
            hardware.all_specs(),
            key=lambda s: math.hypot(
                math.log(s.peak("fp32") / self.matmul_flops_per_s),
                math.log(s.mem_bandwidth_bytes_per_s / self.mem_bandwidth_bytes_per_s),
            ),
        )

    def _rows(self) -> list[tuple[str, str, str]]:
        def spread(key: str) -> str:
            return _spread(self.spread[key]) if key in self.spread else ""

        rows = []
        for k, v in self.matmul_flops_per_s_by_dtype.items():
            slow = f" (no fast path: {_fmt.times(v / self.matmul_flops_per_s)})"
            slow = "" if self.fast_path(k) else slow
            rows.append((f"matmul {k}", _fmt.si(v, "FLOP/s") + slow, spread(_spread_key(k))))
        rows.append(("vector fp32", _fmt.si(self.vector_flops_per_s, "FLOP/s"), spread("vector")))
        rows += [
            (f"special {k}", _fmt.si(v, "/s"), spread("special"))
            for k, v in self.special_per_s.items()
        ]
        forms = self.bandwidth_by_form_bytes_per_s
        patterns = [p for p in ("read", "copy", "update") if set(PATTERN_FORMS[p]) & set(forms)]
        rows += [
            (f"memory {p}", _fmt.si(self.bandwidth_for(p), "B/s"), spread("memory"))
            for p in patterns
        ] or [("memory", _fmt.si(self.mem_bandwidth_bytes_per_s, "B/s"), spread("memory"))]
        rows.append(("op overhead", _fmt.seconds(self.op_overhead_s), spread("overhead")))
        if self.device == "cpu":
            rows.append(("CPU share", f"{self.cpu_share:.0%}, {self.num_threads} threads", ""))
        return rows  # ridge points: the chapters work them out from these numbers

    def _header(self) -> tuple[str, str, str]:
        kernels = f", {self.kernels}" if self.kernels else ""
        return (f"{self.device_name} ({self.device}{kernels})", self.measured_at[:16], "spread")

    def __repr__(self) -> str:
        return "Ceilings\n" + _fmt.text_table(self._header(), self._rows(), align="lrr", rule=True)

    def _repr_html_(self) -> str:
        return _fmt.html_table(self._header(), self._rows(), align="lrr")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the cache's and the class reports' format)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        plain = {MappingProxyType: dict, tuple: list}
        return {k: plain.get(type(v), lambda x: x)(v) for k, v in d.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ceilings:
        """The inverse of :meth:`to_dict`; unknown keys are an error (``TypeError``)."""
        return cls(**_checks.kind("ceilings", data, Mapping, "Ceilings.to_dict()"))


def _spread(value: float) -> str:
    return f"{value:.0%}" + " UNTRUSTED" * (value >= UNTRUSTED_SPREAD)


def measure_ceilings(
    device: str | torch.device | None = None, *, refresh: bool = False, progress: bool = True
) -> Ceilings:
    """Measure this machine's ceilings, or return them from the cache."""
    dev = machine.physical(machine.resolve(device))
    if dev.type == "cpu":  # before the cache, which is keyed by the thread count
        timing.settle_threads()
    name = machine.device_name(dev)
    path = _cache_path(dev, name)
    if not refresh and path not in _MEMO:  # a missing, stale or damaged file: measure again
        with contextlib.suppress(OSError, ValueError, TypeError):
            _MEMO[path] = Ceilings.from_dict(json.loads(path.read_text()))
    if refresh or path not in _MEMO:
        _MEMO[path] = _measure(dev, name, progress)
        _save(path, _MEMO[path])
    return _MEMO[path]


#: This process's ceilings, by cache path (read or measured once).
_MEMO: dict[Path, Ceilings] = {}


def _measure(dev: torch.device, name: str, progress: bool) -> Ceilings:
    """1. each ceiling's kernel, screened; 2. all timed in alternating rounds; 3. the best round."""
    precisions = PRECISIONS if dev.type == "cuda" else ("fp32", "bf16", "fp16")  # TF32: GPUs'
    say = _fmt.Progress(progress, total=len(precisions) + 2, prefix="ceilings")
    say.say(f"{dev} ({name})")
    work, methods, sizes = {}, {}, {}  # key: (call, work per call: FLOPs, bytes, evaluations)
    for p in precisions:  # 1.
        call, sizes[p], methods[p] = _matmul(dev, p)
        work[_spread_key(p)] = (call, 2.0 * sizes[p] ** 3)
        say(f"matmul {p}")
    call, flops, vector_method = _vector(dev)
    say("vector")
    special, special_method = _special(dev)
    forms, nbytes = _memory(dev)
    a, b = torch.ones(1, device=dev), torch.zeros(1, device=dev)
    work |= {"vector": (call, flops), "overhead": (functools.partial(a.add_, b), 1.0)}
    work |= {f"special {k}": v for k, v in special.items()}
    work |= {f"memory {k}": v for k, v in forms.items()}
    got, _ = timing.rounds({k: c for k, (c, _) in work.items()}, dev, ROUNDS)  # 2.
    seconds = {k: [s for s, _ in v] for k, v in got.items()}
    rates = {k: [work[k][1] / s for s in v] for k, v in seconds.items()}
    best = {k: max(v) for k, v in rates.items()}  # 3.
    spread: dict[str, float] = {}  # of a group (special, memory): its noisiest member's
    for k, v in rates.items():
        group = k.split()[0]
        spread[group] = max(spread.get(group, 0.0), 1 - _fmt.median(v) / best[k])
    writes = [max(rates[f"memory {f}"][i] for f in _WRITE_FORMS) for i in range(ROUNDS)]
    matmul = {p: best[_spread_key(p)] for p in precisions}
    if dev.type == "cpu" and (cpu := parts.cpu_parts(torch.get_num_threads())):  # not cached:
        cpu.check("matmul", matmul["fp32"])  # a rate no clock gives is a timing bug
        cpu.check("vector", best["vector"], flops_per_lane=1)
    ceilings = Ceilings(
        device=dev.type,
        device_name=name,
        matmul_flops_per_s=matmul["fp32"],
        vector_flops_per_s=best["vector"],
        mem_bandwidth_bytes_per_s=max(writes),
        op_overhead_s=min(seconds["overhead"]),
        matmul_flops_per_s_by_dtype=matmul,
        special_per_s={k: best[f"special {k}"] for k in special},
        spread=spread,
        rounds=dict.fromkeys(spread, ROUNDS),
        bandwidth_rounds_bytes_per_s=tuple(writes),
        bandwidth_by_form_bytes_per_s={f: best[f"memory {f}"] for f in forms},
        overhead_rounds_s=tuple(seconds["overhead"]),
        cpu_share=_fmt.median([s for _, s in got["matmul"]]) if dev.type == "cpu" else 1.0,
        num_threads=torch.get_num_threads(),
        matmul_size=sizes["fp32"],
        copy_bytes=nbytes,
        vector_method=f"{vector_method}; {special_method}",
        matmul_method="; ".join(f"{p} {m}" for p, m in methods.items()),
        precision_notes=_precision_notes(matmul, dev),
        kernels=_kernels(dev),
        torch_version=torch.__version__,
        library_version=importlib.import_module("brrrlib").__version__,
        host=socket.gethostname(),
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
    say(f"{ROUNDS} rounds: {', '.join(ceilings.noise_notes()) or 'steady'}")
    return ceilings


def _precision_notes(matmul: Mapping[str, float], dev: torch.device) -> dict[str, str]:
    """Why each precision well below fp32's matmul rate is slow here (:func:`precision_reason`)."""
    slow = [k for k in matmul if k != "fp32" and matmul[k] < SLOW_PATH_RATIO * matmul["fp32"]]
    flags = machine.cpu_flags() if dev.type == "cpu" else frozenset()
    told = {
        k: v for k, v in os.environ.items() if k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
    }
    return {k: precision_reason(k, dev.type, flags, _kernels(dev), told) for k in slow}


def _spread_key(precision: str) -> str:
    return "matmul" if precision == "fp32" else f"matmul_{precision}"


def _matmul(dev: torch.device, precision: str) -> tuple[Callable[[], Any], int, str]:
    """The fastest matmul torch runs here in ``precision``: its call, size and how it was found."""
    mode = "high" if precision == "tf32" else "highest"  # TF32 is fp32 at "high" precision
    # the first size, the largest, a call's target seconds and the screen's budget in seconds
    slow = 6.0 if precision == "fp32" else 3.0
    plan = (256, 4096, 0.001, slow) if dev.type == "cpu" else (2048, 8192, 0.002, 2.0)
    kernels_at = functools.partial(_matmul_kernels, dtype=_DTYPES[precision], dev=dev)
    screen = functools.partial(
        _screen, kernels_at, functools.partial(timing.quick_s, device=dev), *plan
    )
    kernel, n, call, method = _in_precision(mode, screen)
    return functools.partial(_in_precision, mode, call), n, f"{kernel}(n={n}); {method}"


def _screen(
    kernels_at: Callable[[int], dict[str, Callable[[], Any]]],
    time_s: Callable[[Callable[[], Any]], float],
    n: int,
    n_max: int,
    target_s: float,
    budget_s: float,
) -> tuple[str, int, Callable[[], Any], str]:
    """Double ``n`` until calls last ``target_s``, the rate flat: the fastest (kernel, n, ...)."""
    # flat: two doublings gained under a quarter (a CPU's bf16 matmul read 1.1 TFLOP/s at
    # n = 512 and 1024, then 2.5 at 2048)
    screened: dict[tuple[str, int], tuple[Callable[[], Any], float]] = {}
    alive, rates, spent = None, [0.0, 0.0], 0.0
    while True:
        kernels = kernels_at(n)
        alive = set(kernels) if alive is None else alive
        times = {}
        for name in alive & set(kernels):
            times[name] = time_s(kernels[name])
            screened[(name, n)] = (kernels[name], times[name])
        fastest = min(times.values(), default=math.inf)
        alive = {name for name, t in times.items() if t < 4 * fastest}
        spent += 3 * sum(times.values())
        rate = 2 * n**3 / fastest
        flat = rate < 1.25 * rates[-1] and rates[-1] < 1.25 * rates[-2]
        settled = all(t >= target_s for t in times.values()) and flat
        next_s = 3 * 8 * sum(times[name] for name in alive)  # 3 samples each at 2n
        if not alive or settled or n >= n_max or spent + next_s > budget_s:
            break
        n, rates = 2 * n, [rates[-1], rate]
    (kernel, size), (call, _) = min(screened.items(), key=lambda kv: kv[1][1] / kv[0][1] ** 3)
    best: dict[str, tuple[float, int]] = {}
    for (name, s), (_, t) in screened.items():
        best[name] = max(best.get(name, (0.0, 0)), (2 * s**3 / t, s))
    method = ", ".join(f"{k} {_fmt.si(r, 'FLOP/s')} (n={s})" for k, (r, s) in best.items())
    return kernel, size, call, method


def _in_precision(mode: str, call: Callable[[], Any]) -> Any:
    """``call()`` under ``torch.set_float32_matmul_precision(mode)``, then put back."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(mode)
    try:
        return call()
    finally:
        torch.set_float32_matmul_precision(before)


def _matmul_kernels(n: int, dtype: torch.dtype, dev: torch.device) -> dict[str, Callable[[], Any]]:
    """The matmul kernels a model runs, on the same square operands."""
    a, b = (torch.randn(n, n, device=dev).to(dtype) for _ in range(2))
    kernels = {
        "torch.mm": functools.partial(torch.mm, a, b, out=torch.empty_like(a)),
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
        call = functools.partial(mkldnn.to_mkldnn(layer, dtype=a.dtype), a.to_mkldnn())
        call()
        return {"MkldnnLinear": call}
    except (RuntimeError, TypeError, ValueError):  # this dtype or build has no such path
        return {}


def _kernels(dev: torch.device) -> str:
    """Which vector kernels torch dispatches to on a CPU ("AVX512", "AVX2", ...); "" elsewhere."""
    return str(torch.backends.cpu.get_cpu_capability()) if dev.type == "cpu" else ""


#: The CPU flags (Linux names: x86, ARM) of a precision's matrix instructions.
_MATRIX_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16", "bf16"), "fp16": ("avx512_fp16", "amx_fp16")}


def precision_reason(
    precision: str,
    device_type: str,
    flags: frozenset[str],
    kernels: str,
    overrides: Mapping[str, str],
) -> str:
    """Why a precision measured slower than fp32, as the evidence: overrides or CPU flags."""
    wanted = _MATRIX_FLAGS.get(precision, ())
    has = "/".join(f for f in wanted if f in flags)
    if device_type != "cpu":  # a GPU's ratio says it all
        return ""
    if overrides or not flags:  # torch was told to use narrower kernels; no /proc/cpuinfo: ""
        return ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return f"torch {kernels or '?'} ignores {has}" if has else f"CPU lacks {'/'.join(wanted)}"


def _vector(dev: torch.device) -> tuple[Callable[[], Any], float, str]:
    """``torch.compile``'d chains of ``x = x * 0.999`` on in-cache data: the call, its multiplies."""
    numel = 2**17 * max(1, torch.get_num_threads()) if dev.type == "cpu" else 2**24
    x = torch.rand(numel, device=dev) + 1.0
    try:
        rates = {}
        for steps in VECTOR_CHAINS:
            compiled = torch.compile(functools.partial(_multiply_chain, steps=steps), dynamic=False)
            call = functools.partial(compiled, x)
            call()
            rates[steps] = (call, numel * steps / timing.quick_s(call, dev))
        steps = max(rates, key=lambda k: rates[k][1])
        tried = ", ".join(f"{k}: {_fmt.si(v[1], 'FLOP/s')}" for k, v in rates.items())
        how = (
            f"torch.compile, {steps} chained multiplies on {_fmt.binary_bytes(4 * numel)} ({tried})"
        )
        return rates[steps][0], numel * steps, how
    except Exception as err:  # any compiler failure (no C compiler, ...): fall back, say why
        small = x[: 2**16].clone()
        call = functools.partial(torch.mul, small, 0.999, out=torch.empty_like(small))
        how = f"eager torch.mul, torch.compile failed ({type(err).__name__}: {_fmt.error_line(err, 80)})"
        return call, small.numel(), how


def _multiply_chain(x: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = x * 0.999  # one FLOP per element; 0.999 keeps the numbers finite
    return x


#: Eager ops that evaluate each function once per element (torch.exp may call MKL's slower
#: accurate routine, sigmoid and gelu their own): the fastest is the rate, so floors stay low.
_SPECIAL_OPS: Mapping[str, tuple[tuple[str, Callable[..., Any]], ...]] = {
    "exp": (("torch.exp", torch.exp), ("torch.sigmoid", torch.sigmoid)),
    "tanh": (
        ("torch.tanh", torch.tanh),
        ("gelu(tanh)", functools.partial(torch.ops.aten.gelu.out, approximate="tanh")),
    ),
    "erf": (("torch.erf", torch.erf), ("gelu", torch.ops.aten.gelu.out)),
    "cos": (("torch.cos", torch.cos), ("torch.sin", torch.sin)),
    "log": (("torch.log", torch.log), ("torch.log1p", torch.log1p)),
}


def _special(dev: torch.device) -> tuple[dict[str, tuple[Callable[[], Any], float]], str]:
    """Each special function's fastest eager op on data in cache: (call, evaluations per call)."""
    threads = max(1, torch.get_num_threads())
    numel = 2**18 * threads if dev.type == "cpu" else machine.last_level_cache_bytes(dev) // 16
    x = torch.rand(numel, device=dev) + 0.5  # in (0.5, 1.5): every function finite
    out = torch.empty_like(x)
    found, won = {}, []
    for name, ops in _SPECIAL_OPS.items():
        calls = {label: functools.partial(op, x, out=out) for label, op in ops}
        label = min(calls, key=lambda k: (calls[k](), timing.quick_s(calls[k], dev))[1])
        found[name] = (calls[label], float(numel))
        won.append(f"{name} by {label}")
    return found, ", ".join(won)


#: The forms of a memory pass that write (8 bytes per fp32 element).
_WRITE_FORMS = ("copy_", "add_", "add(out=)")
#: Each access pattern and the forms that measure it (``Ceilings.bandwidth_for``).
PATTERN_FORMS = {
    "read": ("sum", "dot"),
    "copy": ("copy_", "add(out=)"),
    "update": ("add_",),
    "write": _WRITE_FORMS,
}


def _memory(dev: torch.device) -> tuple[dict[str, tuple[Callable[[], Any], float]], int]:
    """Each form of a pass over a buffer far larger than the caches, warmed: (call, bytes), bytes."""
    # 8x the largest cache (in place, 2x still ran from a 32 MiB L3), at least 256 MiB, at
    # most a 16th of free memory (chapter 02 streams several), a power of two (reshaped)
    llc = machine.last_level_cache_bytes(dev)
    floor = 256 * 2**20 if dev.type == "cpu" else 512 * 2**20
    room = 2 ** int(math.log2(max(machine.available_memory_bytes(dev) // 16, 1)))
    n = max(64 * 2**20, min(max(8 * llc, floor), room))
    src = torch.ones(n // 4, device=dev)
    dst, zero = torch.zeros_like(src), torch.zeros(1, device=dev)
    forms = {  # (call, bytes moved): a read moves n bytes, the others read and write
        "copy_": (functools.partial(dst.copy_, src), 2.0 * n),
        "add_": (functools.partial(src.add_, zero), 2.0 * n),
        "add(out=)": (functools.partial(torch.add, src, zero, out=dst), 2.0 * n),
        "sum": (src.sum, float(n)),
        # the two halves' dot product: every byte read once, through the BLAS kernels a
        # matrix-vector product uses (faster than sum's reduction on some CPUs)
        "dot": (functools.partial(torch.dot, *src.chunk(2)), float(n)),
    }
    deadline = time.perf_counter() + (0.3 if dev.type == "cpu" else 0.05)
    while time.perf_counter() < deadline:  # a VM's memory can burst ~2x its rate for ~0.25 s
        forms["copy_"][0]()
        machine.sync(dev)
    return forms, n


def _cache_path(dev: torch.device, device_name: str) -> Path:
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    cpu = f"{torch.get_num_threads()}threads-{_kernels(dev)}-{isa}" if dev.type == "cpu" else "--"
    key = (
        f"{socket.gethostname()}-{device_name}-{dev}-{cpu}-torch{torch.__version__}"
        f"-brrr{importlib.import_module('brrrlib').__version__}-method{_METHOD_VERSION}"
    )
    return _files.cache_dir() / ("ceilings-" + re.sub(r"[^A-Za-z0-9.]+", "_", key) + ".json")


def _save(path: Path, ceilings: Ceilings) -> None:
    """Write the cache file; one that cannot be written costs the cache only (a warning)."""
    try:
        _files.write_atomic(path, json.dumps(ceilings.to_dict(), indent=2))
    except OSError as err:
        why = f"{type(err).__name__}: {err.strerror or err}"
        where = f"could not cache the ceilings in {path.parent} ({why})"
        warnings.warn(f"{where}; set BRRR_CACHE_DIR to a writable folder", stacklevel=3)
