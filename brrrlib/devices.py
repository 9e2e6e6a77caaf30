"""Devices: which one to use, how to wait for it, and what it can do on paper.

Three things live here, in the order a course needs them:

* :func:`device` and :func:`sync`: pick cuda, then mps, then cpu (the
  ``BRRR_DEVICE`` environment variable overrides), and wait for queued work.
  GPUs run asynchronously: a kernel launch returns before the kernel ends, so
  every timing boundary needs a sync (gpt-fast's ``device_sync`` idea). This
  is the one ``sync`` in the library.
* :class:`DeviceSpec`, :func:`spec`, :func:`specs`, :func:`spec_table`: the
  ONE table of spec-sheet numbers in the project, each row with its source.
  Notebooks ask ``bl.spec("A100")`` instead of typing 312e12.
* Facts about the machine in front of you that measuring needs: the device's
  name, its last-level cache, its free memory.

What the machine *does*, measured, lives in :mod:`brrrlib.ceilings`.
"""

from __future__ import annotations

import difflib
import html
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from brrrlib import _fmt

__all__ = [
    "ESSAY_PYTHON_ADDS_PER_S",
    "DeviceSpec",
    "SpecTable",
    "available_memory_bytes",
    "check_available",
    "device",
    "device_name",
    "dtype_key",
    "last_level_cache_bytes",
    "physical",
    "release_cached_memory",
    "resolve",
    "spec",
    "spec_for_device_name",
    "spec_table",
    "specs",
    "sync",
]

_KNOWN_DEVICE_TYPES = ("cpu", "cuda", "mps")


# --------------------------------------------------------------------------
# device() and sync()
# --------------------------------------------------------------------------
def _available_device_types() -> list[str]:
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    found.append("cpu")
    return found


def device() -> torch.device:
    """The device the course runs on: cuda if present, else mps, else cpu.

    Set the environment variable ``BRRR_DEVICE`` (``cpu``, ``cuda``,
    ``cuda:1``, ``mps``; any case) to override, e.g. to run the CPU version
    of a chapter on a GPU machine. An unknown or unavailable value raises a
    ``ValueError`` that lists what this machine has.
    """
    wanted = os.environ.get("BRRR_DEVICE", "").strip()
    if not wanted:
        return torch.device(_available_device_types()[0])
    return resolve(wanted.lower(), argument="BRRR_DEVICE")


def resolve(device: Any = None, *, argument: str = "device") -> torch.device:
    """Turn a ``device=`` argument into an available ``torch.device``; None means :func:`device`.

    Accepts a ``torch.device`` or a string such as ``"cpu"``, ``"CUDA"`` or
    ``"cuda:0"``. Anything else, or a device this machine does not have,
    raises an error that names ``argument`` and says what to pass.
    """
    if device is None:
        return globals()["device"]()
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device.strip().lower())
        except RuntimeError:
            dev = None
        if dev is None or dev.type not in _KNOWN_DEVICE_TYPES:
            close = difflib.get_close_matches(device.strip().lower(), _KNOWN_DEVICE_TYPES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"{argument}={device!r} is not a device brrr knows{hint}; use one of "
                f"{', '.join(_KNOWN_DEVICE_TYPES)} (available here: "
                f"{', '.join(_available_device_types())})"
            )
    else:
        raise TypeError(
            f"{argument} must be None, a str such as 'cpu' or a torch.device, "
            f"got {type(device).__name__}"
        )
    check_available(dev, argument)
    return dev


def check_available(dev: torch.device, argument: str = "device") -> None:
    """Raise a ``ValueError`` that says what to do when this machine has no ``dev``."""
    available = _available_device_types()
    if dev.type not in available:
        what = {"cuda": "no CUDA GPU (or a CPU-only torch build)", "mps": "no Apple GPU"}.get(
            dev.type, f"no {dev.type} device"
        )
        raise ValueError(
            f"{argument}={str(dev)!r} but this machine has {what}; available here: "
            f"{', '.join(available)}. Use one of those (or omit {argument} to get "
            f"{available[0]!r})."
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(
            f"{argument}={str(dev)!r} but only {torch.cuda.device_count()} CUDA device(s) exist "
            f"(cuda:0 .. cuda:{torch.cuda.device_count() - 1})"
        )


def physical(dev: torch.device) -> torch.device:
    """``cuda`` as the ``cuda:N`` it means right now; other devices unchanged.

    "cuda" and "cuda:0" are one GPU: measuring or caching them twice would
    give one GPU two sets of numbers.
    """
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def sync(device: str | torch.device | torch.Tensor | None = None) -> None:
    """Wait until all work queued on ``device`` has finished.

    CUDA and MPS run asynchronously: ``y = x @ x`` returns as soon as the
    kernel is *queued*. Reading a clock before ``sync()`` measures the launch,
    not the work. On the CPU work is synchronous and this is a no-op.
    ``device`` may be a device, its name, a tensor (its device is used), or
    None for :func:`device`.
    """
    if isinstance(device, torch.Tensor):
        dev = device.device
    elif device is None or isinstance(device, (str, torch.device)):
        dev = resolve(device)
    else:
        raise TypeError(
            f"device must be None, a str, a torch.device or a tensor, got {type(device).__name__}"
        )
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


# --------------------------------------------------------------------------
# The spec-sheet table
# --------------------------------------------------------------------------
_DTYPE_KEYS = ("fp32", "tf32", "bf16", "fp16")
_DTYPE_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
}  # fmt: skip


def dtype_key(dtype: str | torch.dtype) -> str:
    """Normalise 'float32', torch.bfloat16, 'BF16', ... to a table key."""
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a str or torch.dtype, got {type(dtype).__name__}")
    key = _DTYPE_ALIASES.get(dtype.strip().lower())
    if key is None:
        raise ValueError(
            f"dtype={dtype!r} is not in the spec table; use one of {', '.join(_DTYPE_KEYS)}"
        )
    return key


@dataclass(frozen=True)
class DeviceSpec:
    """One device's spec-sheet numbers, with where they come from.

    ``peak_flops_per_s`` maps a dtype key to the vendor's peak:

    * ``"fp32"``: plain fp32 on the vector units (CUDA cores), no tensor
      cores. This is what elementwise ops and normalisations can use.
    * ``"tf32"``, ``"bf16"``, ``"fp16"``: *dense* matrix multiply on tensor
      cores (matrix cores on AMD). Vendor sheets often print numbers "with
      sparsity", twice the dense figure; the table halves those (comments in
      the rows say where). A key is absent where the hardware has no such
      path (V100 and T4 have no tf32 or bf16 tensor cores); asking for it
      raises a ``KeyError`` that says so, rather than inventing a number.

    ``mem_bandwidth_bytes_per_s`` is the DRAM/HBM bandwidth on the sheet (a
    copy kernel reaches ~80-90% of it). The ratio of the two is the ridge
    point: :meth:`ridge_point_flops_per_byte`.
    """

    name: str
    peak_flops_per_s: Mapping[str, float]
    mem_bandwidth_bytes_per_s: float
    mem_bytes: int
    source: str
    aliases: tuple[str, ...] = ()
    kind: str = "gpu"
    vendor: str = "NVIDIA"
    notes: str = ""
    # Regular expressions matched against torch.cuda.get_device_name().
    _name_patterns: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        peaks = dict(self.peak_flops_per_s)
        unknown = set(peaks) - set(_DTYPE_KEYS)
        if unknown or "fp32" not in peaks:
            raise ValueError(
                f"{self.name}: peak_flops_per_s keys must include fp32 and be in {_DTYPE_KEYS}"
            )
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(peaks))

    def __hash__(self) -> int:
        return hash(self.name)

    def peak(self, dtype: str | torch.dtype = "fp32") -> float:
        """Peak FLOP/s for ``dtype`` ("fp32", "tf32", "bf16", "fp16" or a torch dtype)."""
        key = dtype_key(dtype)
        if key not in self.peak_flops_per_s:
            raise KeyError(
                f"{self.name} has no {key} peak: the hardware has no {key} tensor-core path. "
                f"Available: {', '.join(self.peak_flops_per_s)}"
            )
        return self.peak_flops_per_s[key]

    def ridge_point_flops_per_byte(self, dtype: str | torch.dtype = "fp32") -> float:
        """FLOPs per byte at which compute and bandwidth take equal time.

        An op doing fewer FLOPs per byte moved than this is memory-bound on
        this device; more, compute-bound. A100 fp32: 19.5e12 / 1.555e12 = 12.5.
        """
        return self.peak(dtype) / self.mem_bandwidth_bytes_per_s

    def _repr_html_(self) -> str:
        peaks = ", ".join(f"{k} {_fmt.si(v, 'FLOP/s')}" for k, v in self.peak_flops_per_s.items())
        bandwidth = _fmt.si(self.mem_bandwidth_bytes_per_s, "B/s")
        return (
            f"<b>{html.escape(self.name)}</b>: {peaks}; memory {bandwidth}, "
            f"{self.mem_bytes / 1e9:.0f} GB <br><small>source: {html.escape(self.source)}</small>"
        )


_GB = 10**9
_GiB = 2**30
_NV = "NVIDIA"
_SPECS: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        name="A100 40GB SXM",
        # Sheet: TF32 156 | 312*, BF16/FP16 312 | 624* (* = with sparsity); dense used.
        peak_flops_per_s={"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12},
        mem_bandwidth_bytes_per_s=1.555e12,
        mem_bytes=40 * _GiB,
        source="NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/), A100 40GB SXM column",
        aliases=("a100", "a100-40gb", "a100 40gb", "a100-sxm4-40gb", "a100 sxm"),
        _name_patterns=(r"A100.*40GB", r"A100-SXM4(?!.*80)", r"^NVIDIA A100$"),
    ),
    DeviceSpec(
        name="A100 80GB SXM",
        # Same compute as the 40GB part; HBM2e raises bandwidth to 2,039 GB/s.
        peak_flops_per_s={"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12},
        mem_bandwidth_bytes_per_s=2.039e12,
        mem_bytes=80 * _GiB,
        source="NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/), A100 80GB SXM column",
        aliases=("a100-80gb", "a100 80gb", "a100-sxm4-80gb"),
        _name_patterns=(r"A100.*80GB",),
    ),
    DeviceSpec(
        name="H100 SXM",
        # Sheet: TF32 989*, BF16/FP16 1,979* TFLOPS (* = with sparsity); halved.
        peak_flops_per_s={"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12, "fp16": 989.5e12},
        mem_bandwidth_bytes_per_s=3.35e12,
        mem_bytes=80 * _GiB,
        source="NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), H100 SXM column",
        aliases=("h100", "h100-sxm", "h100 sxm5", "h100-sxm5-80gb"),
        _name_patterns=(r"H100.*(SXM|HBM3)",),
    ),
    DeviceSpec(
        name="H100 PCIe",
        # Sheet: TF32 756*, BF16/FP16 1,513* TFLOPS (* = with sparsity); halved.
        peak_flops_per_s={"fp32": 51e12, "tf32": 378e12, "bf16": 756.5e12, "fp16": 756.5e12},
        mem_bandwidth_bytes_per_s=2.0e12,
        mem_bytes=80 * _GiB,
        source="NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), H100 PCIe column",
        aliases=("h100-pcie", "h100 pcie"),
        _name_patterns=(r"H100.*PCIe",),
    ),
    DeviceSpec(
        name="H200 SXM",
        # Sheet: TF32 989*, BF16/FP16 1,979* TFLOPS (* = with sparsity); halved.
        peak_flops_per_s={"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12, "fp16": 989.5e12},
        mem_bandwidth_bytes_per_s=4.8e12,
        mem_bytes=141 * _GB,
        source="NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/), H200 SXM column",
        aliases=("h200", "h200-sxm", "h200 sxm"),
        _name_patterns=(r"H200",),
    ),
    DeviceSpec(
        name="V100 SXM2 32GB",
        # Volta tensor cores do fp16 only: no tf32, no bf16 (keys absent).
        peak_flops_per_s={"fp32": 15.7e12, "fp16": 125e12},
        mem_bandwidth_bytes_per_s=900e9,
        mem_bytes=32 * _GiB,
        source="NVIDIA Tesla V100 GPU datasheet (nvidia.com/en-us/data-center/v100/), V100 SXM2 column",
        aliases=("v100", "v100-sxm2", "tesla v100"),
        _name_patterns=(r"V100",),
    ),
    DeviceSpec(
        name="T4",
        # Turing tensor cores: fp16 (mixed precision) 65 TFLOPS; no tf32, no bf16.
        peak_flops_per_s={"fp32": 8.1e12, "fp16": 65e12},
        mem_bandwidth_bytes_per_s=320e9,
        mem_bytes=16 * _GiB,
        source="NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/tesla-t4/)",
        aliases=("tesla t4", "t4"),
        _name_patterns=(r"\bT4\b",),
    ),
    DeviceSpec(
        name="L4",
        # Sheet: TF32 120*, BF16/FP16 242* TFLOPS (* = with sparsity); halved.
        peak_flops_per_s={"fp32": 30.3e12, "tf32": 60e12, "bf16": 121e12, "fp16": 121e12},
        mem_bandwidth_bytes_per_s=300e9,
        mem_bytes=24 * _GiB,
        source="NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/)",
        aliases=("l4",),
        _name_patterns=(r"\bL4\b",),
    ),
    DeviceSpec(
        name="A10G",
        peak_flops_per_s={"fp32": 35e12, "tf32": 35e12, "bf16": 70e12, "fp16": 70e12},
        mem_bandwidth_bytes_per_s=600e9,
        mem_bytes=24 * _GiB,
        source=(
            "AWS G5 variant of the A10; NVIDIA publishes no A10G datasheet. Dense figures as "
            "tabulated in Baseten, 'NVIDIA A10 vs A10G for ML model inference' "
            "(baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/)"
        ),
        aliases=("a10g", "aws a10g"),
        notes="Less tensor throughput than the A10 (125 TFLOPS bf16) but the same 600 GB/s.",
        _name_patterns=(r"A10G",),
    ),
    DeviceSpec(
        name="RTX 4090",
        # GeForce: tensor FP16/BF16 with FP32 accumulate (what PyTorch uses) is
        # 165.2 dense (330.4 sparse); TF32 82.6 dense (165.2 sparse).
        peak_flops_per_s={"fp32": 82.6e12, "tf32": 82.6e12, "bf16": 165.2e12, "fp16": 165.2e12},
        mem_bandwidth_bytes_per_s=1008e9,
        mem_bytes=24 * _GiB,
        source="NVIDIA Ada Lovelace GPU Architecture whitepaper v2.1, Appendix A, GeForce RTX 4090 column",
        aliases=("4090", "rtx4090", "rtx 4090", "geforce rtx 4090"),
        kind="gpu (consumer)",
        _name_patterns=(r"4090",),
    ),
    DeviceSpec(
        name="RTX 3090",
        # GA102 whitepaper: FP16/BF16 tensor with FP32 accumulate 71 dense
        # (142 sparse); TF32 35.6 dense (71 sparse).
        peak_flops_per_s={"fp32": 35.6e12, "tf32": 35.6e12, "bf16": 71e12, "fp16": 71e12},
        mem_bandwidth_bytes_per_s=936e9,
        mem_bytes=24 * _GiB,
        source="NVIDIA Ampere GA102 GPU Architecture whitepaper v2.0, Appendix A, GeForce RTX 3090 column",
        aliases=("3090", "rtx3090", "rtx 3090", "geforce rtx 3090"),
        kind="gpu (consumer)",
        _name_patterns=(r"3090",),
    ),
    DeviceSpec(
        name="MI300X",
        # Sheet: FP32 vector 163.4; TF32 653.7, BF16/FP16 1,307.4 dense
        # (1,307.4 / 2,614.9 with sparsity).
        peak_flops_per_s={"fp32": 163.4e12, "tf32": 653.7e12, "bf16": 1307.4e12, "fp16": 1307.4e12},
        mem_bandwidth_bytes_per_s=5.3e12,
        mem_bytes=192 * _GB,
        source="AMD Instinct MI300X accelerator datasheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)",
        aliases=("mi300x", "mi300", "instinct mi300x"),
        vendor="AMD",
        _name_patterns=(r"MI300X",),
    ),
)


def specs() -> tuple[DeviceSpec, ...]:
    """Every device in the spec-sheet table, in table order."""
    return _SPECS


@dataclass(frozen=True)
class SpecTable:
    """Spec-sheet rows side by side, optionally with this machine's measured row.

    Made by :func:`spec_table`; renders as a plain-text or HTML table. Peaks
    are dense (no sparsity); "-" marks a precision the hardware has no fast
    path for. Two ridge points per row: fp32 (the CUDA cores, what plain
    fp32 code gets) and the best tensor-core precision (what bf16/fp16 code
    gets): the FLOPs per byte a matmul needs before memory stops setting its
    pace. The measured row (from :func:`brrrlib.measure_ceilings`) fills in
    every precision measured here and its ridge points the same way.
    """

    rows: tuple[DeviceSpec, ...]
    measured: Any = None  # a Ceilings, or None

    _HEADER = ("device", "fp32", "tf32", "bf16", "fp16", "bandwidth", "memory",
               "ridge fp32", "ridge best")  # fmt: skip

    @staticmethod
    def _ridges(peaks: Mapping[str, float], bandwidth: float) -> tuple[str, str]:
        best_key = max(peaks, key=lambda k: peaks[k])
        return (
            f"{peaks['fp32'] / bandwidth:.3g} FLOP/B",
            f"{peaks[best_key] / bandwidth:.3g} FLOP/B ({best_key})",
        )

    def _cells(self) -> list[tuple[str, ...]]:
        def tflops(peaks: Mapping[str, float], key: str) -> str:
            value = peaks.get(key)
            return "-" if value is None else f"{value / 1e12:.4g} TFLOP/s"

        cells = []
        for s in self.rows:
            peaks = s.peak_flops_per_s
            cells.append(
                (
                    s.name,
                    *(tflops(peaks, k) for k in _DTYPE_KEYS),
                    _fmt.si(s.mem_bandwidth_bytes_per_s, "B/s"),
                    f"{s.mem_bytes / 2**30:.0f} GiB",
                    *self._ridges(peaks, s.mem_bandwidth_bytes_per_s),
                )
            )
        m = self.measured
        if m is not None:
            peaks = dict(m.matmul_flops_per_s_by_dtype)
            cells.append(
                (
                    f"this machine ({m.device}, measured)",
                    *(tflops(peaks, k) for k in _DTYPE_KEYS),
                    _fmt.si(m.mem_bandwidth_bytes_per_s, "B/s"),
                    "",
                    *self._ridges(peaks, m.mem_bandwidth_bytes_per_s),
                )
            )
        return cells

    def __repr__(self) -> str:
        rows = [self._HEADER, *self._cells()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADER))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
            for r in self._cells()
        )
        sources = "".join(
            f"<li>{html.escape(s.name)}: {html.escape(s.source)}</li>" for s in self.rows
        )
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<details><summary>sources</summary><ul>{sources}</ul></details>"
        )


def spec_table(ceilings: Any = None, names: Any = None) -> SpecTable:
    """The spec-sheet table to read at a glance, with this machine beside it.

    ``ceilings`` (from :func:`brrrlib.measure_ceilings`) adds a measured row;
    ``names`` picks rows by :func:`spec` name: one name or a list of them
    (default: every row). Chapter 00 uses it to set a laptop's measured
    numbers beside datacenter GPUs: notice how much faster the FLOP/s
    columns grew than the bandwidth column.
    """
    if isinstance(names, str):
        names = [names]
    if names is not None and not all(isinstance(n, str) for n in names):
        raise TypeError("names must be a device name such as 'A100' or a list of them")
    rows = _SPECS if names is None else tuple(spec(n) for n in names)
    if ceilings is not None and not hasattr(ceilings, "matmul_flops_per_s_by_dtype"):
        raise TypeError(
            f"ceilings must come from bl.measure_ceilings(), got {type(ceilings).__name__}"
        )
    return SpecTable(rows, ceilings)


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


def spec(name: str) -> DeviceSpec:
    """Look up a spec-sheet device by name or alias, case-insensitively.

    ``spec("A100")`` is the A100 40GB SXM of the essay (312 TFLOP/s bf16,
    19.5 TFLOP/s fp32, 1.555 TB/s); ``spec("h100")`` is the SXM part;
    ``spec("4090")`` the RTX 4090. An unknown name raises ``ValueError``
    listing the closest names in the table.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str such as 'A100', got {type(name).__name__}")
    key = _norm(name)
    table: dict[str, DeviceSpec] = {}
    for s in _SPECS:
        for n in (s.name, *s.aliases):
            table.setdefault(_norm(n), s)
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=4, cutoff=0.4)
    names = list(dict.fromkeys(table[c].name for c in close))
    hint = (
        f"closest: {', '.join(names)}" if names else f"known: {', '.join(s.name for s in _SPECS)}"
    )
    raise ValueError(f"no device named {name!r} in the spec table; {hint}")


def spec_for_device_name(device_name: str) -> DeviceSpec | None:
    """The table row whose name patterns match a GPU name reported by torch."""
    for s in _SPECS:
        if any(re.search(p, device_name, flags=re.IGNORECASE) for p in s._name_patterns):
            return s
    return None


#: How many additions a plain Python loop does per second, as the essay quotes it
#: (Horace He, "Making Deep Learning Go Brrrr From First Principles", 2022,
#: https://horace.io/brrr_intro.html, section "Overhead"). Set it beside
#: ``bl.spec("A100").peak_flops_per_s["bf16"]``: 312e12 / 32e6 = 9.75 million
#: FLOPs in the time Python does one addition. Chapter 03 measures this
#: machine's own figure with ``bl.workloads.python_adds``.
ESSAY_PYTHON_ADDS_PER_S: float = 32e6


# --------------------------------------------------------------------------
# Facts about this machine
# --------------------------------------------------------------------------
def device_name(dev: torch.device) -> str:
    """What the device calls itself: the GPU's name, or the CPU's model name."""
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    if dev.type == "mps":
        return f"Apple GPU ({_cpu_name()})"
    return _cpu_name()


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux; elsewhere fall back to platform
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=2, check=False,
            )  # fmt: skip
            if out.stdout.strip():
                return out.stdout.strip()  # "Apple M2 Pro"
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def last_level_cache_bytes(dev: torch.device | None = None) -> int:
    """Size of the largest cache in front of memory: L2 on a GPU, the largest CPU cache else.

    Linux reads sysfs; elsewhere, or if unknown, 32 MiB (a large desktop L3).
    """
    if dev is not None and dev.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 50 * 2**20))
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.fullmatch(r"(\d+)([KMG]?)", f.read_text().strip())
        if m:
            sizes.append(int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)])
    return max(sizes) if sizes else 32 * 2**20


def available_memory_bytes(dev: torch.device) -> int:
    """Bytes that can be allocated on ``dev`` right now (an estimate).

    CUDA: ``torch.cuda.mem_get_info`` (free bytes as the driver sees them).
    MPS: the recommended working set minus what the driver holds. CPU:
    psutil's ``available`` (free plus reclaimable page cache; psutil comes
    with Jupyter), else ``MemAvailable`` from /proc/meminfo.
    """
    if dev.type == "cuda":
        free_bytes, _total = torch.cuda.mem_get_info(dev)
        return int(free_bytes)
    if dev.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):
        return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    if os.path.isfile("/proc/meminfo"):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 4 * 2**30  # unknown: assume a small laptop's free memory


def release_cached_memory() -> None:
    """Give memory held by dead tensors back: after an out-of-memory error, say.

    Collects Python garbage, then returns the blocks PyTorch's caching
    allocator keeps for reuse (CUDA, MPS) to the driver, so the memory shows
    as free again and the kernel stays usable.
    """
    import gc

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        torch.mps.empty_cache()
