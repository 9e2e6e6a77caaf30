"""The one spec-sheet table: devices, links and nodes on paper, each row with its source."""

from __future__ import annotations

import difflib
import re
from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from brrrlib import _checks, _fmt

__all__ = [
    "DeviceSpec",
    "LinkSpec",
    "host_link",
    "link",
    "links",
    "node",
    "spec",
    "spec_for_device_name",
    "spec_table",
]

#: The table's precisions, each with the other names it goes by.
_ALSO = {"fp32": "float32 float f32", "tf32": "", "bf16": "bfloat16", "fp16": "float16 half f16"}
_DTYPE_KEYS = tuple(_ALSO)
_DTYPE_ALIASES = {name: key for key, more in _ALSO.items() for name in (key, *more.split())}


def dtype_key(dtype: str | torch.dtype) -> str:
    """Normalise 'float32', torch.bfloat16, 'BF16', ... to a table key."""
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    _checks.kind("dtype", dtype, str, "torch.dtype")
    return _DTYPE_ALIASES.get(dtype.strip().lower()) or _checks.one_of("dtype", dtype, _DTYPE_KEYS)


@dataclass(frozen=True)
class DeviceSpec:
    """One device's spec-sheet numbers, with where they come from."""

    name: str
    # "fp32" on the vector units; "tf32", "bf16", "fp16" dense on tensor cores (sparse halved);
    # absent where the hardware has no such path
    peak_flops_per_s: Mapping[str, float]
    mem_bandwidth_bytes_per_s: float
    mem_bytes: int
    source: str
    aliases: tuple[str, ...] = ()
    kind: str = "gpu"
    vendor: str = "NVIDIA"
    # Regular expressions matched against torch.cuda.get_device_name().
    _name_patterns: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        peaks = dict(self.peak_flops_per_s)
        if "fp32" not in peaks or not set(peaks) <= set(_DTYPE_KEYS):
            raise ValueError(f"{self.name}: peak_flops_per_s needs fp32, may add tf32 bf16 fp16")
        rates = {f"peak_flops_per_s[{k!r}]": v for k, v in peaks.items()}
        rates["mem_bandwidth_bytes_per_s"] = self.mem_bandwidth_bytes_per_s
        for name, value in rates.items():
            _checks.number(name, value, positive=True, finite=True)
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(peaks))

    def __hash__(self) -> int:
        return hash(self.name)

    def peak(self, dtype: str | torch.dtype = "fp32") -> float:
        """Peak FLOP/s for ``dtype`` ("fp32", "tf32", "bf16", "fp16" or a torch dtype)."""
        return self.peak_flops_per_s[
            _checks.one_of("dtype", dtype_key(dtype), self.peak_flops_per_s)
        ]

    @property
    def fast_precision(self) -> str:
        """The 16-bit precision its matmul units run fastest ("fp32" on a device with neither)."""
        bf16, fp16 = (self.peak_flops_per_s.get(k, 0.0) for k in ("bf16", "fp16"))
        return "fp32" if not bf16 + fp16 else "bf16" if bf16 >= fp16 else "fp16"

    def ridge_point_flops_per_byte(self, dtype: str | torch.dtype = "fp32") -> float:
        """FLOPs per byte at which compute and bandwidth take equal time."""
        return self.peak(dtype) / self.mem_bandwidth_bytes_per_s

    def _repr_html_(self) -> str:
        return SpecTable((self,))._repr_html_()


_GB = 10**9
_GiB = 2**30
# Dense peaks in TFLOP/s ("-": the hardware has no such path; a sheet's "with sparsity" figure is
# halved), bandwidth in GB/s, memory, the PCIe generation to its host as its sheet prints it, the
# patterns matched against torch.cuda.get_device_name(), aliases, source. The A100 80GB computes as
# the 40GB part; Volta (V100) and Turing (T4) tensor cores do fp16 only. GeForce sheets: fp16/bf16
# with fp32 accumulate (what PyTorch uses). The A10G is AWS G5's A10 (125 TFLOPS bf16, the same
# 600 GB/s), with no NVIDIA sheet.
_DEVICE_ROWS = r"""
A100 40GB SXM  ; 19.5  156    312    312    ; 1555 ; 40 GiB ; 4 ; A100.*40GB, A100-SXM4(?!.*80), ^NVIDIA A100$ ; a100, a100 40gb, a100-sxm4-40gb, a100 sxm ; NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/), A100 40GB SXM column
A100 80GB SXM  ; 19.5  156    312    312    ; 2039 ; 80 GiB ; 4 ; A100.*80GB                                   ; a100 80gb, a100-sxm4-80gb                 ; NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/), A100 80GB SXM column
H100 SXM       ; 67    494.5  989.5  989.5  ; 3350 ; 80 GiB ; 5 ; H100.*(SXM|HBM3)                             ; h100, h100 sxm5, h100-sxm5-80gb           ; NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), H100 SXM column
H100 PCIe      ; 51    378    756.5  756.5  ; 2000 ; 80 GiB ; 5 ; H100.*PCIe                                   ; h100 pcie                                 ; NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), H100 PCIe column
H200 SXM       ; 67    494.5  989.5  989.5  ; 4800 ; 141 GB ; 5 ; H200                                         ; h200                                      ; NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/), H200 SXM column
V100 SXM2 32GB ; 15.7  -      -      125    ; 900  ; 32 GiB ; 3 ; V100                                         ; v100, v100 sxm2, tesla v100               ; NVIDIA Tesla V100 GPU datasheet (nvidia.com/en-us/data-center/v100/), V100 SXM2 column
T4             ; 8.1   -      -      65     ; 320  ; 16 GiB ; 3 ; \bT4\b                                       ; tesla t4                                  ; NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/tesla-t4/)
L4             ; 30.3  60     121    121    ; 300  ; 24 GiB ; 4 ; \bL4\b                                       ; l4                                        ; NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/)
A10G           ; 35    35     70     70     ; 600  ; 24 GiB ; 4 ; A10G                                         ; aws a10g                                  ; Baseten, 'NVIDIA A10 vs A10G for ML model inference' (baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/)
RTX 4090       ; 82.6  82.6   165.2  165.2  ; 1008 ; 24 GiB ; 4 ; 4090                                         ; 4090, rtx4090, rtx 4090, geforce rtx 4090 ; NVIDIA Ada Lovelace GPU Architecture whitepaper v2.1, Appendix A, GeForce RTX 4090 column
RTX 3090       ; 35.6  35.6   71     71     ; 936  ; 24 GiB ; 4 ; 3090                                         ; 3090, rtx3090, rtx 3090, geforce rtx 3090 ; NVIDIA Ampere GA102 GPU Architecture whitepaper v2.0, Appendix A, GeForce RTX 3090 column
MI300X         ; 163.4 653.7  1307.4 1307.4 ; 5300 ; 192 GB ; 5 ; MI300X                                       ; mi300x, mi300, instinct mi300x            ; AMD Instinct MI300X accelerator datasheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)
"""


def _device(name, peaks, bandwidth, mem, _pcie, patterns, aliases, source) -> DeviceSpec:
    size, unit = mem.split()
    return DeviceSpec(
        name,
        {k: float(v + "e12") for k, v in zip(_DTYPE_KEYS, peaks.split(), strict=True) if v != "-"},
        float(bandwidth + "e9"),
        int(size) * {"GiB": _GiB, "GB": _GB}[unit],
        source,
        aliases=tuple(aliases.split(", ")),
        vendor="AMD" if name.startswith("MI") else "NVIDIA",
        _name_patterns=tuple(patterns.split(", ")),
    )


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in row.split(";")] for row in table.strip().splitlines()]


_SPECS: tuple[DeviceSpec, ...] = tuple(_device(*row) for row in _rows(_DEVICE_ROWS))
_HOST_PCIE = {row[0]: row[4] for row in _rows(_DEVICE_ROWS)}


def all_specs() -> tuple[DeviceSpec, ...]:
    """Every device in the spec-sheet table, in table order."""
    return _SPECS


@dataclass(frozen=True)
class SpecTable:
    """Spec-sheet rows side by side, optionally with this machine's measured row ("-": no path)."""

    rows: tuple[DeviceSpec, ...]
    measured: Any = None  # a Ceilings, or None

    _HEADER = ("device", *_DTYPE_KEYS, "bandwidth", "memory")

    def _cells(self) -> list[tuple[str, ...]]:
        rows = [
            (s.name, s.peak_flops_per_s, s.mem_bandwidth_bytes_per_s, s.mem_bytes)
            for s in self.rows
        ]
        if (m := self.measured) is not None:
            here = f"{m.device} (measured)"
            rows.append((here, m.matmul_flops_per_s_by_dtype, m.mem_bandwidth_bytes_per_s, 0))
        return [
            (
                name,
                *(f"{peaks[k] / 1e12:.4g} TFLOP/s" if k in peaks else "-" for k in _DTYPE_KEYS),
                _fmt.si(bw, "B/s"),
                f"{mem / 2**30:.0f} GiB" if mem else "",
            )
            for name, peaks, bw, mem in rows
        ]

    def __repr__(self) -> str:
        return _fmt.text_table(self._HEADER, self._cells(), align="lrrrrrr", rule=True)

    def _repr_html_(self) -> str:
        hover, caption = [s.source for s in self.rows], "each device's source: hover its name"
        return _fmt.html_table(
            self._HEADER, self._cells(), caption=caption, align="lrrrrrr", hover=hover
        )


def spec_table(ceilings: Any = None, names: Any = None) -> SpecTable:
    """The table of ``names`` (default: every row), with a measured row when given ``ceilings``."""
    if ceilings is not None and not hasattr(ceilings, "matmul_flops_per_s_by_dtype"):
        raise TypeError(f"ceilings must be bl.measure_ceilings(), got {type(ceilings).__name__}")
    names = [names] if isinstance(names, str) else names
    return SpecTable(_SPECS if names is None else tuple(map(spec, names)), ceilings)


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


def _lookup(rows: tuple[Any, ...], name: str, what: str) -> Any:
    """The row called ``name`` or an alias (any case); a ValueError names the closest rows."""
    _checks.kind("name", name, str, "str")
    table: dict[str, Any] = {}
    for row in rows:
        for n in (row.name, *getattr(row, "aliases", ())):
            table.setdefault(_norm(n), row)
    if (key := _norm(name)) in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=4, cutoff=0.4)
    names = list(dict.fromkeys(table[c].name for c in close)) or [r.name for r in rows]
    raise ValueError(f"no {what} named {name!r} in the table; closest: {', '.join(names)}")


def spec(name: str) -> DeviceSpec:
    """A spec-sheet device by name or alias (``spec("A100")``); ValueError names the closest."""
    return _lookup(_SPECS, name, "device")


def spec_for_device_name(device_name: str) -> DeviceSpec | None:
    """The table row whose name patterns match a GPU name reported by torch."""
    matches = (s for s in _SPECS if any(re.search(p, device_name, re.I) for p in s._name_patterns))
    return next(matches, None)


#: Additions per second of a plain Python loop, as the essay quotes it (Horace He, "Making
#: Deep Learning Go Brrrr From First Principles", 2022, https://horace.io/brrr_intro.html,
#: section "Overhead").
ESSAY_PYTHON_ADDS_PER_S: float = 32e6


# --------------------------------------------------------------------------- links

#: The rungs of the ladder past one chip, nearest first.
LINK_KINDS = ("host-device", "device-device", "node-node", "storage")


@dataclass(frozen=True)
class LinkSpec:
    """One link's spec-sheet bandwidth, with where it comes from (chapter 05)."""

    name: str
    kind: str  # one of LINK_KINDS
    bandwidth_bytes_per_s: float  # one direction, in bytes (as an all-reduce's bus bandwidth)
    source: str
    aliases: tuple[str, ...] = ()
    both_directions_on_sheet: bool = False

    @property
    def sheet_bytes_per_s(self) -> float:
        """The bandwidth as the spec sheet prints it (both directions added where it does)."""
        return self.bandwidth_bytes_per_s * (2 if self.both_directions_on_sheet else 1)

    def _repr_html_(self) -> str:
        row = (self.name, self.kind, _fmt.si(self.bandwidth_bytes_per_s, "B/s"))
        return _fmt.html_table(("link", "kind", "each way"), [row], hover=[self.source])


# Bandwidth each way in GB/s ("x2": the sheet adds both directions), aliases, source. PCIe: 8,
# 16, 32 GT/s per lane (generations 3, 4, 5) x 16 lanes x 128/130 / 8 bits; the GPU sheets print
# both directions added (A100 'PCIe Gen4: 64 GB/s', H100 'PCIe Gen5: 128 GB/s'). NVLink: 12 links
# (A100), 18 (H100). InfiniBand: one single-port adapter per GPU.
_LINK_ROWS = """
PCIe 3.0 x16           ; host-device   ; 15.75  ; pcie3, pcie 3, pcie gen3, pcie 3.0                  ; PCI-SIG, PCI Express Base Specification 3.0
PCIe 4.0 x16           ; host-device   ; 31.5   ; pcie4, pcie 4, pcie gen4, pcie 4.0                  ; PCI-SIG, PCI Express Base Specification 4.0
PCIe 5.0 x16           ; host-device   ; 63     ; pcie5, pcie 5, pcie gen5, pcie 5.0                  ; PCI-SIG, PCI Express Base Specification 5.0
NVLink 3 (A100)        ; device-device ; 300 x2 ; nvlink 3, nvlink3, a100 nvlink, nvlink a100         ; NVIDIA A100 Tensor Core GPU datasheet, NVLink row
NVLink 4 (H100)        ; device-device ; 450 x2 ; nvlink 4, nvlink4, h100 nvlink, nvlink h100, nvlink ; NVIDIA H100 Tensor Core GPU datasheet, SXM column, NVLink row
HDR InfiniBand         ; node-node     ; 25     ; hdr, hdr ib, infiniband hdr, hdr infiniband 200     ; NVIDIA DGX A100 datasheet, ConnectX-6 networking row
NDR InfiniBand         ; node-node     ; 50     ; ndr, ndr ib, infiniband, infiniband ndr, ib         ; NVIDIA DGX H100 datasheet, ConnectX-7 networking row
100 GbE                ; node-node     ; 12.5   ; 100gbe, 100g ethernet, ethernet 100g                ; IEEE 802.3ba-2010
400 GbE                ; node-node     ; 50     ; 400gbe, 400g ethernet, ethernet 400g                ; IEEE 802.3bs-2017
NVMe SSD (PCIe 4.0 x4) ; storage       ; 7.45   ; nvme, ssd, nvme ssd, disk                           ; Samsung 990 PRO data sheet, sequential read
"""


_LINKS: tuple[LinkSpec, ...] = tuple(
    LinkSpec(
        name, kind, float(bw.removesuffix(" x2") + "e9"), src, tuple(aka.split(", ")), "x2" in bw
    )
    for name, kind, bw, aka, src in _rows(_LINK_ROWS)
)


def links(kind: str | None = None) -> tuple[LinkSpec, ...]:
    """Every link in the table, nearest rung first; ``kind`` keeps one of :data:`LINK_KINDS`."""
    _checks.one_of("kind", kind, (*LINK_KINDS, None))
    return tuple(x for x in _LINKS if kind in (None, x.kind))


def link(name: str) -> LinkSpec:
    """A link by name or alias (``link("NDR")``); ValueError names the closest."""
    return _lookup(_LINKS, name, "link")


def host_link(device: str) -> LinkSpec:
    """The link between ``device`` and its host, as its sheet prints it: PCIe 3.0 x16 on a T4."""
    return link(f"pcie{_HOST_PCIE[spec(device).name]}")


#: A cluster node: ``gpus_per_node`` x ``gpu`` (a :func:`spec` row) joined by ``gpu_link``, and
#: ``nics_per_node`` x ``nic_link`` for its cluster network (its storage NICs not counted).
NodeSpec = namedtuple("NodeSpec", "name gpu gpus_per_node gpu_link nics_per_node nic_link source")
# The guides: 8 GPUs on NVSwitches, and 8 single-port ConnectX-6 (A100) or ConnectX-7 (H100)
# adapters for the cluster network.
_NODE_ROWS = """
DGX A100 ; A100 40GB SXM ; 8 ; NVLink 3 (A100) ; 8 ; HDR InfiniBand ; NVIDIA DGX A100 User Guide, Hardware Overview
DGX H100 ; H100 SXM      ; 8 ; NVLink 4 (H100) ; 8 ; NDR InfiniBand ; NVIDIA DGX H100/H200 User Guide, Hardware Overview
"""
_NODES = tuple(
    NodeSpec(name, gpu, int(gpus), gpu_link, int(nics), nic, source)
    for name, gpu, gpus, gpu_link, nics, nic, source in _rows(_NODE_ROWS)
)


def node(name: str) -> NodeSpec:
    """A node of the table, by name (case-insensitive): ``node("DGX H100")``. Chapter 05."""
    return _lookup(_NODES, name, "node")
