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

from brrrlib import _fmt

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
        # Sheet: FP32 8.1, mixed-precision FP16/FP32 65 TFLOPS; Turing has no tf32, no bf16.
        peak_flops_per_s={"fp32": 8.1e12, "fp16": 65e12},
        mem_bandwidth_bytes_per_s=320e9,
        mem_bytes=16 * _GiB,
        source="NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/tesla-t4/): FP32 8.1 TFLOPS, mixed-precision FP16/FP32 65 TFLOPS, 16 GB GDDR6 at 320+ GB/s, x16 PCIe Gen3",
        aliases=("tesla t4", "t4"),
        _name_patterns=(r"\bT4\b",),
    ),
    DeviceSpec(
        name="L4",
        # Sheet: TF32 120*, BF16/FP16 242* TFLOPS (* = with sparsity); halved.
        peak_flops_per_s={"fp32": 30.3e12, "tf32": 60e12, "bf16": 121e12, "fp16": 121e12},
        mem_bandwidth_bytes_per_s=300e9,
        mem_bytes=24 * _GiB,
        source="NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/): FP32 30.3, TF32 120*, BF16/FP16 242* TFLOPS (* sparse), 24 GB at 300 GB/s, PCIe Gen4 x16",
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
            here = f"this machine ({m.device}, measured)"
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


def _lookup(rows: tuple[Any, ...], name: str, what: str, example: str) -> Any:
    """The row called ``name`` or one of its aliases, case-insensitively; else a ``ValueError`` naming
    the closest rows (all of them when none is close).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str such as {example!r}, got {type(name).__name__}")
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
    return _lookup(_SPECS, name, "device", "A100")


def spec_for_device_name(device_name: str) -> DeviceSpec | None:
    """The table row whose name patterns match a GPU name reported by torch."""
    for s in _SPECS:
        if any(re.search(p, device_name, flags=re.IGNORECASE) for p in s._name_patterns):
            return s
    return None


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
    notes: str = ""

    @property
    def sheet_bytes_per_s(self) -> float:
        """The bandwidth as the spec sheet prints it (both directions added where it does)."""
        return self.bandwidth_bytes_per_s * (2 if self.both_directions_on_sheet else 1)

    def _repr_html_(self) -> str:
        row = (self.name, self.kind, _fmt.si(self.bandwidth_bytes_per_s, "B/s"))
        return _fmt.html_table(("link", "kind", "each way"), [row], hover=[self.source])


_PCIE = "PCI-SIG, PCI Express Base Specification"
_LINKS: tuple[LinkSpec, ...] = (
    LinkSpec(
        "PCIe 3.0 x16",
        "host-device",
        15.75e9,  # 8 GT/s x 16 lanes x 128/130 / 8 bits
        f"{_PCIE} 3.0 (8 GT/s per lane, 128b/130b encoding); the NVIDIA T4 datasheet prints 'x16 PCIe Gen3'",
        aliases=("pcie3", "pcie 3", "pcie gen3", "pcie 3.0"),
    ),
    LinkSpec(
        "PCIe 4.0 x16",
        "host-device",
        31.5e9,  # 16 GT/s x 16 lanes x 128/130 / 8 bits
        f"{_PCIE} 4.0 (16 GT/s per lane, 128b/130b encoding); the NVIDIA A100 datasheet "
        "prints 'PCIe Gen4: 64 GB/s', both directions",
        aliases=("pcie4", "pcie 4", "pcie gen4", "pcie 4.0"),
    ),
    LinkSpec(
        "PCIe 5.0 x16",
        "host-device",
        63.0e9,  # 32 GT/s x 16 lanes x 128/130 / 8 bits
        f"{_PCIE} 5.0 (32 GT/s per lane, 128b/130b encoding); the NVIDIA H100 datasheet "
        "prints 'PCIe Gen5: 128 GB/s', both directions",
        aliases=("pcie5", "pcie 5", "pcie gen5", "pcie 5.0"),
    ),
    LinkSpec(
        "NVLink 3 (A100)",
        "device-device",
        300e9,
        "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/): "
        "'NVLink: 600 GB/s' (12 links, both directions added)",
        aliases=("nvlink 3", "nvlink3", "a100 nvlink", "nvlink a100"),
        both_directions_on_sheet=True,
        notes="Between the 8 GPUs of one DGX A100 node (through NVSwitch).",
    ),
    LinkSpec(
        "NVLink 4 (H100)",
        "device-device",
        450e9,
        "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), SXM "
        "column: 'NVLink: 900 GB/s' (18 links, both directions added)",
        aliases=("nvlink 4", "nvlink4", "h100 nvlink", "nvlink h100", "nvlink"),
        both_directions_on_sheet=True,
        notes="Between the 8 GPUs of one DGX H100 node (through NVSwitch).",
    ),
    LinkSpec(
        "HDR InfiniBand",
        "node-node",
        200e9 / 8,
        "NVIDIA DGX A100 datasheet: 8 single-port ConnectX-6 adapters, 200 Gb/s HDR "
        "InfiniBand each (one per GPU)",
        aliases=("hdr", "hdr ib", "infiniband hdr", "hdr infiniband 200"),
        notes="200 Gb/s per port; a DGX A100 has one port per GPU for the compute network.",
    ),
    LinkSpec(
        "NDR InfiniBand",
        "node-node",
        400e9 / 8,
        "NVIDIA DGX H100 datasheet: 8 ConnectX-7 adapters, 400 Gb/s NDR InfiniBand each "
        "(one per GPU)",
        aliases=("ndr", "ndr ib", "infiniband", "infiniband ndr", "ib"),
        notes="400 Gb/s per port; a DGX H100 has one port per GPU for the compute network.",
    ),
    LinkSpec(
        "100 GbE",
        "node-node",
        100e9 / 8,
        "IEEE 802.3ba-2010, 100 Gb/s Ethernet",
        aliases=("100gbe", "100g ethernet", "ethernet 100g"),
    ),
    LinkSpec(
        "400 GbE",
        "node-node",
        400e9 / 8,
        "IEEE 802.3bs-2017, 400 Gb/s Ethernet",
        aliases=("400gbe", "400g ethernet", "ethernet 400g"),
    ),
    LinkSpec(
        "NVMe SSD (PCIe 4.0 x4)",
        "storage",
        7.45e9,
        "Samsung 990 PRO data sheet: sequential read up to 7,450 MB/s",
        aliases=("nvme", "ssd", "nvme ssd", "disk"),
        notes="Sequential read of a fast consumer drive; random 4 KiB reads are far slower.",
    ),
)


def links(kind: str | None = None) -> tuple[LinkSpec, ...]:
    """Every link in the table, nearest rung first; ``kind`` keeps one of :data:`LINK_KINDS`."""
    if kind is not None and kind not in LINK_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LINK_KINDS)} or None, got {kind!r}")
    return tuple(x for x in _LINKS if kind in (None, x.kind))


def link(name: str) -> LinkSpec:
    """A link by name or alias (``link("NDR")``); ValueError names the closest."""
    return _lookup(_LINKS, name, "link", "NVLink 4")


#: The PCIe generation between each device and its host, as its sheet prints it.
_HOST_PCIE = {
    **dict.fromkeys(("T4", "V100 SXM2 32GB"), 3),
    **dict.fromkeys(("A100 40GB SXM", "A100 80GB SXM", "L4", "A10G", "RTX 3090", "RTX 4090"), 4),
    **dict.fromkeys(("H100 SXM", "H100 PCIe", "H200 SXM", "MI300X"), 5),
}


def host_link(device: str) -> LinkSpec:
    """The link between ``device`` and its host, as its sheet prints it: PCIe 3.0 x16 on a T4."""
    return link(f"PCIe {_HOST_PCIE[spec(device).name]}.0 x16")


#: A cluster node: ``gpus_per_node`` x ``gpu`` (a :func:`spec` row) joined by ``gpu_link``, and
#: ``nics_per_node`` x ``nic_link`` for its cluster network (its storage NICs not counted).
NodeSpec = namedtuple("NodeSpec", "name gpu gpus_per_node gpu_link nics_per_node nic_link source")
_NODES = (
    NodeSpec(
        "DGX A100",
        "A100 40GB SXM",
        8,
        "NVLink 3 (A100)",
        8,
        "HDR InfiniBand",
        "NVIDIA DGX A100 User Guide, Hardware Overview: 8 A100 GPUs on 6 NVSwitches; 8 single-port ConnectX-6 VPI, 200 Gb/s HDR InfiniBand, for the cluster network",
    ),
    NodeSpec(
        "DGX H100",
        "H100 SXM",
        8,
        "NVLink 4 (H100)",
        8,
        "NDR InfiniBand",
        "NVIDIA DGX H100/H200 User Guide, Hardware Overview: 8 H100 GPUs on 4 NVSwitch chips; 4 OSFP ports serving 8 single-port ConnectX-7 VPI, up to 400 Gb/s InfiniBand, for the cluster network",
    ),
)


def node(name: str) -> NodeSpec:
    """A node of the table, by name (case-insensitive): ``node("DGX H100")``. Chapter 05."""
    return _lookup(_NODES, name, "node", "DGX H100")
