"""Devices: which one to use, how to wait for it, what it can do on paper and in fact.

Three things live here, in the order a course needs them:

* :func:`device` and :func:`sync`: pick cuda, then mps, then cpu (the
  ``BRRR_DEVICE`` environment variable overrides), and wait for queued work.
  GPUs run asynchronously: a kernel launch returns before the kernel ends, so
  every timing boundary needs a sync (gpt-fast's ``device_sync`` idea).
* :class:`DeviceSpec`, :func:`spec`, :func:`specs`: the ONE table of
  spec-sheet numbers in the project, each row with its source. Notebooks ask
  ``bl.spec("A100")`` instead of typing 312e12.
* :class:`Ceilings`, :func:`measure_ceilings`: the same three numbers measured
  on the machine in front of you: matmul FLOP/s (the factory), memory
  bandwidth (the trucks), and the cost of one tiny op (the paperwork).
  Chapter 00 introduces all three.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import html
import json
import math
import os
import platform
import re
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

__all__ = [
    "ESSAY_PYTHON_ADDS_PER_S",
    "Ceilings",
    "DeviceSpec",
    "device",
    "SpecTable",
    "measure_ceilings",
    "resolve",
    "spec",
    "spec_table",
    "specs",
    "sync",
]

_KNOWN_DEVICE_TYPES = ("cpu", "cuda", "mps")
_NOISY_IQR_RATIO = 0.1  # same threshold as brrrlib.timing.NOISY_IQR_RATIO
_MIN_CPU_SHARE = 0.8  # below this share of its threads' CPU time, the machine is busy


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
    ``cuda:1``, ``mps``) to override, e.g. to run the CPU version of a
    chapter on a GPU machine. An unknown or unavailable value raises a
    ``ValueError`` that lists what this machine has.
    """
    available = _available_device_types()
    wanted = os.environ.get("BRRR_DEVICE", "").strip()
    if not wanted:
        return torch.device(available[0])
    try:
        dev = torch.device(wanted)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in _KNOWN_DEVICE_TYPES:
        raise ValueError(
            f"BRRR_DEVICE={wanted!r} is not a device brrr knows; set it to one of "
            f"{', '.join(_KNOWN_DEVICE_TYPES)} (available here: {', '.join(available)}) or unset it"
        )
    if dev.type not in available:
        raise ValueError(
            f"BRRR_DEVICE={wanted!r} but this machine has no {dev.type} device "
            f"(available here: {', '.join(available)}); unset BRRR_DEVICE or pick one of those"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(
            f"BRRR_DEVICE={wanted!r} but only {torch.cuda.device_count()} CUDA device(s) exist "
            f"(cuda:0 .. cuda:{torch.cuda.device_count() - 1})"
        )
    return dev


def _default_device() -> torch.device:
    return device()  # the module-level function (resolve's argument shadows its name)


def resolve(device: Any = None) -> torch.device:
    """Turn a ``device=`` argument into a ``torch.device``: None means :func:`device`.

    Accepts a ``torch.device`` or a string such as ``"cpu"`` or ``"cuda:0"``;
    anything else raises an error that says what to pass.
    """
    if device is None:
        return _default_device()
    if isinstance(device, torch.device):
        return device
    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError as err:
            raise ValueError(
                f"device={device!r} is not a device; use 'cpu', 'cuda' or 'mps'"
            ) from err
    raise TypeError(f"device must be None, a str or a torch.device, got {type(device).__name__}")


def sync(device: str | torch.device | torch.Tensor | None = None) -> None:
    """Wait until all work queued on ``device`` has finished.

    CUDA and MPS run asynchronously: ``y = x @ x`` returns as soon as the
    kernel is *queued*. Reading a clock before ``sync()`` measures the launch,
    not the work. On the CPU work is synchronous and this is a no-op.
    ``device`` may be a device, its name, a tensor (its device is used), or
    None for :func:`device`.
    """
    if device is None:
        dev = globals()["device"]()
    elif isinstance(device, torch.Tensor):
        dev = device.device
    elif isinstance(device, (str, torch.device)):
        dev = torch.device(device)
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


def _dtype_key(dtype: str | torch.dtype) -> str:
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
        key = _dtype_key(dtype)
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
        peaks = ", ".join(f"{k} {_fmt_flops(v)}" for k, v in self.peak_flops_per_s.items())
        return (
            f"<b>{html.escape(self.name)}</b>: {peaks}; memory {_fmt_bytes_per_s(self.mem_bandwidth_bytes_per_s)}, "
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
    are dense (no sparsity); "-" marks a dtype the hardware has no fast path
    for. The ridge column is the best half-precision peak over bandwidth: the
    FLOPs per byte a kernel needs before the tensor cores, not the memory, set
    its pace. The measured row uses the fp32 matmul ceiling.
    """

    rows: tuple[DeviceSpec, ...]
    measured: Any = None  # a Ceilings, or None

    _HEADER = ("device", "fp32", "tf32", "bf16", "fp16", "bandwidth", "memory", "ridge")

    def _cells(self) -> list[tuple[str, ...]]:
        def tflops(s: DeviceSpec, key: str) -> str:
            value = s.peak_flops_per_s.get(key)
            return "-" if value is None else f"{value / 1e12:.4g} TFLOP/s"

        cells = []
        for s in self.rows:
            half = max(s.peak_flops_per_s.get(k, 0.0) for k in ("bf16", "fp16", "fp32"))
            cells.append(
                (
                    s.name,
                    *(tflops(s, k) for k in ("fp32", "tf32", "bf16", "fp16")),
                    _fmt_bytes_per_s(s.mem_bandwidth_bytes_per_s),
                    f"{s.mem_bytes / 2**30:.0f} GiB",
                    f"{half / s.mem_bandwidth_bytes_per_s:.0f} FLOP/B",
                )
            )
        m = self.measured
        if m is not None:
            cells.append(
                (
                    f"this machine ({m.device}, measured)",
                    f"{m.matmul_flops_per_s / 1e12:.3g} TFLOP/s",
                    "",
                    "",
                    "",
                    _fmt_bytes_per_s(m.mem_bandwidth_bytes_per_s),
                    "",
                    f"{m.ridge_point_flops_per_byte():.1f} FLOP/B (fp32)",
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

    ``ceilings`` (from :func:`measure_ceilings`) adds a measured row;
    ``names`` picks rows by :func:`spec` name (default: every row). Chapter 00
    uses it to set a laptop's measured numbers beside datacenter GPUs: notice
    how much faster the FLOP/s columns grew than the bandwidth column.
    """
    rows = _SPECS if names is None else tuple(spec(n) for n in names)
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


def _spec_for_device_name(device_name: str) -> DeviceSpec | None:
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
# Measured ceilings
# --------------------------------------------------------------------------
def _fmt_flops(x: float) -> str:
    return f"{x / 1e12:.3g} TFLOP/s" if x >= 1e12 else f"{x / 1e9:.3g} GFLOP/s"


def _fmt_bytes_per_s(x: float) -> str:
    return f"{x / 1e12:.3g} TB/s" if x >= 1e12 else f"{x / 1e9:.3g} GB/s"


def _fmt_s(x: float) -> str:
    from brrrlib.timing import _format_seconds

    return _format_seconds(x)


@dataclass(frozen=True)
class Ceilings:
    """This machine's three ceilings, measured (see :func:`measure_ceilings`).

    * ``matmul_flops_per_s``: a large square fp32 matmul. The factory's
      top speed; nothing you write will beat it.
    * ``vector_flops_per_s``: fp32 elementwise arithmetic on data already in
      cache, so no trucks are waiting; the speed of non-matmul work when it is
      not memory-bound (``vector_method`` says how it was measured).
    * ``mem_bandwidth_bytes_per_s``: bytes read + written per second by a
      large copy: how fast the trucks bring data from the warehouse.
    * ``op_overhead_s``: one tiny op (``a + b`` on 1-element tensors) end to
      end: Python, the dispatcher and (on a GPU) the kernel launch.

    Throughputs use the fastest sample (``Timing.min_s``), because a ceiling
    is what the machine *can* do: another program, an interrupt or a page
    fault only ever slow a run down, and every sample lasts >= 1 ms, so the
    clock's own error cannot make one look fast. Your op's *median* then
    stays below the ceiling, as a percentage of peak should. The overhead
    uses the median: what every tiny op actually pays. So does the memory
    bandwidth: on shared and virtual machines memory can briefly run far
    above the rate it sustains, and a ceiling you can reach only for a
    quarter of a second is not one an op can be measured against.
    ``matmul_flops_per_s_by_dtype`` adds tf32/bf16/fp16 on CUDA.
    """

    device: str
    device_name: str
    matmul_flops_per_s: float
    vector_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    op_overhead_s: float
    dtype: str = "fp32"
    torch_version: str = ""
    measured_at: str = ""
    host: str = ""
    library_version: str = ""
    num_threads: int = 1
    matmul_size: int = 0
    copy_bytes: int = 0
    vector_method: str = ""
    matmul_flops_per_s_by_dtype: Mapping[str, float] = field(default_factory=dict)
    relative_iqr: Mapping[str, float] = field(default_factory=dict)
    cpu_share: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "matmul_flops_per_s",
            "vector_flops_per_s",
            "mem_bandwidth_bytes_per_s",
            "op_overhead_s",
        ):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        for name in ("matmul_flops_per_s_by_dtype", "relative_iqr"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def __hash__(self) -> int:
        return hash((self.device, self.device_name, self.measured_at))

    @property
    def noisy(self) -> bool:
        """True if a measurement's IQR exceeded 10% of its median, or (CPU)
        the cores were not ours: ``cpu_share`` below 80%.

        ``cpu_share`` is the CPU time this process got during the matmul,
        divided by wall time x threads. Another busy program makes it drop,
        and every parallel op then waits for a descheduled thread, which
        makes the ceilings *consistently* low (a small spread cannot reveal
        that). Close the other program and measure again with
        ``measure_ceilings(refresh=True)`` (or ``brrr doctor --refresh``).
        """
        busy = self.device == "cpu" and self.cpu_share < _MIN_CPU_SHARE
        return busy or any(v > _NOISY_IQR_RATIO for v in self.relative_iqr.values())

    def _noise_note(self) -> str:
        parts = []
        if self.device == "cpu" and self.cpu_share < _MIN_CPU_SHARE:
            parts.append(
                f"this process got only {self.cpu_share:.0%} of its {self.num_threads} threads' "
                "CPU time: another program is busy, so the ceilings are too low"
            )
        noisy = [k for k, v in self.relative_iqr.items() if v > _NOISY_IQR_RATIO]
        if noisy:
            parts.append(f"the {', '.join(noisy)} measurement(s) had a spread > 10% of the median")
        return "; ".join(parts) + "; close other programs and run measure_ceilings(refresh=True)"

    def ridge_point_flops_per_byte(self) -> float:
        """``matmul_flops_per_s / mem_bandwidth_bytes_per_s``: FLOPs per byte needed to be compute-bound."""
        return self.matmul_flops_per_s / self.mem_bandwidth_bytes_per_s

    def nearest_spec(self) -> DeviceSpec:
        """The spec-sheet row to set beside these measurements.

        On a GPU, the row whose name matches ``device_name`` (an "NVIDIA
        A100-SXM4-80GB" gets "A100 80GB SXM"). Otherwise (a CPU, an
        unlisted GPU) the row closest in log fp32 FLOP/s and log bandwidth,
        which for a laptop CPU is usually the T4: the gap is the lesson.
        """
        by_name = _spec_for_device_name(self.device_name) if self.device == "cuda" else None
        if by_name is not None:
            return by_name

        def distance(s: DeviceSpec) -> float:
            return math.hypot(
                math.log(s.peak("fp32") / self.matmul_flops_per_s),
                math.log(s.mem_bandwidth_bytes_per_s / self.mem_bandwidth_bytes_per_s),
            )

        return min(_SPECS, key=distance)

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("matmul (fp32)", _fmt_flops(self.matmul_flops_per_s)),
            ("vector (fp32)", _fmt_flops(self.vector_flops_per_s)),
            ("memory bandwidth", _fmt_bytes_per_s(self.mem_bandwidth_bytes_per_s)),
            ("op overhead", _fmt_s(self.op_overhead_s)),
            ("ridge point", f"{self.ridge_point_flops_per_byte():.3g} FLOP/byte"),
        ]
        rows += [
            (f"matmul ({k})", _fmt_flops(v))
            for k, v in self.matmul_flops_per_s_by_dtype.items()
            if k != "fp32"
        ]
        return rows

    def _title(self) -> str:
        threads = f", {self.num_threads} threads" if self.device == "cpu" else ""
        noisy = " NOISY: measure again on a quiet machine" if self.noisy else ""
        return (
            f"{self.device} ({self.device_name}{threads}), measured {self.measured_at[:16]}{noisy}"
        )

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        lines = [f"Ceilings: {self._title()}"]
        lines += [f"  {k:<{width}}  {v}" for k, v in self._rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td style='text-align:left'>{html.escape(k)}</td><td style='text-align:right'>{html.escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        return f"<table><caption style='text-align:left'><b>Ceilings</b>: {html.escape(self._title())}</caption>{body}</table>"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the on-disk cache format)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["matmul_flops_per_s_by_dtype"] = dict(self.matmul_flops_per_s_by_dtype)
        d["relative_iqr"] = dict(self.relative_iqr)
        return d


def _last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (Linux sysfs), or 32 MiB if unknown."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.fullmatch(r"(\d+)([KMG]?)", f.read_text().strip())
        if m:
            sizes.append(int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)])
    return max(sizes) if sizes else 32 * 2**20


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux; elsewhere fall back to platform
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    if dev.type == "mps":
        return f"Apple GPU ({platform.machine()})"
    return _cpu_name()


def _library_version() -> str:
    import brrrlib

    return getattr(brrrlib, "__version__", "0")


#: Bumped whenever the way a ceiling is measured changes, so old cached files are not reused.
_CEILINGS_METHOD_VERSION = 2


def _cache_path(dev: torch.device, device_name: str) -> Path:
    root = Path(os.environ.get("BRRR_CACHE_DIR") or Path.home() / ".cache" / "brrr")
    key = "-".join(
        [
            socket.gethostname(),
            device_name,
            str(dev),
            f"{torch.get_num_threads()}threads" if dev.type == "cpu" else "",
            f"torch{torch.__version__}",
            f"brrr{_library_version()}",
            f"method{_CEILINGS_METHOD_VERSION}",
        ]
    )
    return root / ("ceilings-" + re.sub(r"[^A-Za-z0-9.]+", "_", key) + ".json")


class _Progress:
    """One line per step on stderr; works the same in a terminal and a notebook."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled, self.total, self.step, self.t0 = enabled, total, 0, time.perf_counter()

    def __call__(self, message: str) -> None:
        self.step += 1
        if self.enabled:
            elapsed = time.perf_counter() - self.t0
            print(
                f"brrr [{self.step}/{self.total}] {elapsed:5.1f}s  {message}",
                file=sys.stderr,
                flush=True,
            )


def measure_ceilings(
    device: str | torch.device | None = None, *, refresh: bool = False, progress: bool = True
) -> Ceilings:
    """Measure this machine's ceilings (or load them from the cache).

    The method, one :func:`brrrlib.benchmark` per ceiling (~10-20 s on a
    2-core laptop, a few seconds on a GPU):

    1. **matmul**: ``torch.mm(a, b, out=c)`` on square fp32 matrices, the
       size doubled from 256 until one matmul takes >= 10 ms (so the BLAS
       kernel runs at full speed), FLOPs = 2 n^3. On CUDA also tf32, bf16
       and fp16 (``matmul_flops_per_s_by_dtype``).
    2. **vector**: elementwise fp32 arithmetic that never waits for memory.
       A single eager op cannot show it: ``x.mul_(y)`` does 1 FLOP per 8-12
       bytes, so it is bandwidth-bound even in cache, and each call pays
       ~1 µs of dispatch. So a ``torch.compile``'d function runs 4
       independent chains of 16 multiply-adds on each element (4 chains hide
       the FMA latency; fused, the data stay in registers) over a tensor that
       fits the L2 cache (CPU) or is large (GPU, 64 multiply-adds per
       chain). On a CPU this reaches the SIMD units' peak, about what matmul
       reaches; on a GPU, the CUDA-core (non-tensor-core) peak. If
       ``torch.compile`` fails, an eager ``torch.addcmul`` on in-cache data
       is used instead (well below the peak; ``vector_method`` says so).
    3. **memory bandwidth**: ``dst.copy_(src)`` into a *preallocated*
       ``dst`` of >= 4x the last-level cache (so the data come from DRAM),
       counting bytes read + written. (A fresh allocation would page-fault
       on first touch and reach only a fraction of this.)
    4. **op overhead**: the median of ``a + b`` on 1-element tensors.

    Results are cached as JSON in ``$BRRR_CACHE_DIR`` (default
    ``~/.cache/brrr``), one file per host, device name, device, thread
    count, torch version and brrrlib version; ``refresh=True`` measures
    again. ``progress=False`` silences the per-step lines on stderr.
    """
    dev = resolve(device)
    if dev.type not in _available_device_types():
        raise ValueError(
            f"device={str(dev)!r} is not available here; available: {', '.join(_available_device_types())}"
        )
    name = _device_name(dev)
    path = _cache_path(dev, name)
    if not refresh and path.exists():
        cached = _load(path)
        if cached is not None:
            return cached
    ceilings = _measure(dev, name, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ceilings.to_dict(), indent=2))
    tmp.replace(path)
    return ceilings


def _load(path: Path) -> Ceilings | None:
    """Read a cached Ceilings; None (measure again) if the file is stale or damaged."""
    try:
        data = json.loads(path.read_text())
        return Ceilings(**data)
    except (OSError, ValueError, TypeError):
        return None


def _measure(dev: torch.device, name: str, progress: bool) -> Ceilings:
    from brrrlib.timing import benchmark

    on_cpu = dev.type == "cpu"
    step = _Progress(progress, total=4)
    if progress:
        print(
            f"brrr: measuring the ceilings of {dev} ({name}); cached afterwards",
            file=sys.stderr,
            flush=True,
        )
    iqr: dict[str, float] = {}

    # 1. matmul: from a size where BLAS kernels run at full speed, grow n
    # until one matmul takes >= 20 ms (or n_max).
    n, n_max = (1024, 4096) if on_cpu else (2048, 8192)
    while True:
        a = torch.randn(n, n, device=dev)
        b = torch.randn(n, n, device=dev)
        c = torch.empty(n, n, device=dev)
        seconds = []
        for _ in range(3):  # the best of 3: the first may spin up the BLAS threads
            sync(dev)
            t0 = time.perf_counter()
            torch.mm(a, b, out=c)
            sync(dev)
            seconds.append(time.perf_counter() - t0)
        if min(seconds) >= 0.02 or n >= n_max:
            break
        n *= 2
    by_dtype: dict[str, float] = {}
    dtypes = [("fp32", torch.float32, False)]
    if dev.type == "cuda":
        dtypes += [
            ("tf32", torch.float32, True),
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
        ]
    for key, dt, tf32 in dtypes:
        old = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            x, y = a.to(dt), b.to(dt)
            out = torch.empty_like(x)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            t = benchmark(torch.mm, x, y, out=out, budget_s=1.0 if on_cpu else 0.3, device=dev)
            if key == "fp32":
                cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
                cpu_share = min(1.0, cpu_s / (wall_s * torch.get_num_threads()))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        by_dtype[key] = 2 * n**3 / t.min_s
        if key == "fp32":
            iqr["matmul"] = t.relative_iqr
    del a, b, c, x, y, out
    step(f"matmul {n}x{n} fp32: {_fmt_flops(by_dtype['fp32'])}")

    # 2. vector: a fused multiply-add chain in registers.
    vector_flops, vector_method, t = _measure_vector(dev, benchmark)
    iqr["vector"] = t.relative_iqr
    step(f"vector fp32: {_fmt_flops(vector_flops)} ({vector_method})")

    # 3. bandwidth: copy into a preallocated buffer, >= 4x the last-level cache.
    if on_cpu:
        nbytes = max(4 * _last_level_cache_bytes(), 64 * 2**20)
    else:
        l2 = (
            getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
            if dev.type == "cuda"
            else 0
        )
        nbytes = max(8 * l2, 512 * 2**20)
    src = torch.ones(nbytes // 4, device=dev)
    dst = torch.zeros_like(src)  # zeros_like touches every page now, not in the timed copy
    t = benchmark(dst.copy_, src, budget_s=1.5 if on_cpu else 0.3, device=dev)
    # The median, not the fastest sample: on a shared or virtual machine the memory
    # system can run far above its sustained rate for a fraction of a second (seen on
    # a 2-core VM: ~90 GB/s for ~0.25 s, then ~45 GB/s), so the fastest sample swings
    # between runs while the median is what a long memory-bound op sustains.
    bandwidth = 2 * nbytes / t.median_s
    iqr["memory"] = t.relative_iqr
    del src, dst
    step(f"memory bandwidth (copy of {nbytes / 2**20:.0f} MiB): {_fmt_bytes_per_s(bandwidth)}")

    # 4. overhead: one tiny op, allocation included, as a user writes it.
    a1 = torch.ones(1, device=dev)
    b1 = torch.ones(1, device=dev)
    t = benchmark(torch.add, a1, b1, budget_s=0.5, device=dev)
    iqr["overhead"] = t.relative_iqr
    step(f"op overhead (a + b on 1 element): {_fmt_s(t.median_s)}")

    ceilings = Ceilings(
        device=dev.type,
        device_name=name,
        matmul_flops_per_s=by_dtype["fp32"],
        vector_flops_per_s=vector_flops,
        mem_bandwidth_bytes_per_s=bandwidth,
        op_overhead_s=t.median_s,
        dtype="fp32",
        torch_version=torch.__version__,
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=socket.gethostname(),
        library_version=_library_version(),
        num_threads=torch.get_num_threads(),
        matmul_size=n,
        copy_bytes=nbytes,
        vector_method=vector_method,
        matmul_flops_per_s_by_dtype=by_dtype,
        relative_iqr=iqr,
        cpu_share=cpu_share if on_cpu else 1.0,
    )
    if progress and ceilings.noisy:
        print(f"brrr: {ceilings._noise_note()}", file=sys.stderr, flush=True)
    return ceilings


_VECTOR_CHAINS = 4  # independent chains per element: hides the FMA latency


def _fma_chains(x: torch.Tensor, steps: int) -> torch.Tensor:
    ys = [x + i for i in range(_VECTOR_CHAINS)]  # 4 FLOPs/element
    for _ in range(steps):
        ys = [y * 0.999 + 0.001 for y in ys]  # 2 FLOPs each
    out = ys[0]
    for y in ys[1:]:
        out = out + y  # 3 FLOPs
    return out


def _measure_vector(dev: torch.device, benchmark: Any) -> tuple[float, str, Any]:
    if dev.type == "cpu":
        # 512 KiB in + 512 KiB out per thread: stays in a 1 MiB L2.
        numel, steps = 2**17 * max(1, torch.get_num_threads()), 16
    else:
        numel, steps = 2**24, 64
    flops = numel * (2 * _VECTOR_CHAINS * (steps + 1) - 1)
    x = torch.rand(numel, device=dev)
    try:
        import functools

        compiled = torch.compile(functools.partial(_fma_chains, steps=steps), dynamic=False)
        compiled(x)
        sync(dev)
    except Exception as err:  # any compiler failure (no C compiler, ...): fall back, say why
        compiled = None
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:80] if str(err) else ''}"
    if compiled is not None:
        t = benchmark(compiled, x, budget_s=1.0 if dev.type == "cpu" else 0.3, device=dev)
        method = f"torch.compile: {_VECTOR_CHAINS} chains x {steps} multiply-adds on {numel * 4 / 2**20:.2g} MiB"
        return flops / t.min_s, method, t
    # Fallback: eager addcmul (2 FLOPs per element) on in-cache data.
    numel = 2**16
    x, y, z, out = (torch.rand(numel, device=dev) for _ in range(4))
    t = benchmark(torch.addcmul, x, y, z, out=out, budget_s=0.5, device=dev)
    return 2 * numel / t.min_s, f"eager addcmul, torch.compile failed ({reason})", t
