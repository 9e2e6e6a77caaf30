"""This machine: which device, how to wait for it, and what it holds."""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import platform
import re
from pathlib import Path
from typing import Any

import torch

from brrrlib import _checks, _fmt

__all__ = [
    "caches",
    "device",
    "device_name",
    "last_level_cache_bytes",
    "sync",
]

_KNOWN_DEVICE_TYPES = ("cpu", "cuda", "mps")


def _available_device_types() -> list[str]:
    gpus = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    return [*(k for k, here in gpus.items() if here), "cpu"]


def device() -> torch.device:
    """The device the course runs on: cuda if present, else mps, else cpu."""
    wanted = os.environ.get("BRRR_DEVICE", "").strip()
    if not wanted:
        return torch.device(_available_device_types()[0])
    return resolve(wanted.lower(), argument="BRRR_DEVICE")


def resolve(device: Any = None, *, argument: str = "device") -> torch.device:
    """Turn a ``device=`` argument into an available ``torch.device``; None means :func:`device`."""
    if device is None:
        return globals()["device"]()
    _checks.kind(argument, device, (str, torch.device), "None, a str or a torch.device")
    name = str(device).strip().lower()
    with contextlib.suppress(RuntimeError):
        device = torch.device(name)
    if not isinstance(device, torch.device) or device.type not in _KNOWN_DEVICE_TYPES:
        close = difflib.get_close_matches(name, _KNOWN_DEVICE_TYPES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        _refuse(
            argument, name, f"is not a device brrr knows{hint}: {', '.join(_KNOWN_DEVICE_TYPES)}"
        )
    check_available(device, argument)
    return device


def _refuse(argument: str, device: str, why: str) -> None:
    """A ``ValueError``: ``argument=device`` and why not, then the device types this machine has."""
    here = ", ".join(_available_device_types())
    raise ValueError(f"{argument}={device!r} {why}; available here: {here}")


def check_available(dev: torch.device, argument: str = "device") -> None:
    """Raise a ``ValueError`` that says what to do when this machine has no ``dev``."""
    if dev.type == "meta":
        _refuse(argument, "meta", "tensors hold shapes but no data: use a real device")
    mps = int(torch.backends.mps.is_available())
    count = {"cpu": math.inf, "cuda": torch.cuda.device_count(), "mps": mps}.get(dev.type, 0)
    if (dev.index or 0) >= count:  # the version says it: a CPU-only torch sees no CUDA device
        _refuse(
            argument, str(dev), f"but torch {torch.__version__} sees {count} {dev.type} devices"
        )


def of(args: Any = (), kwargs: Any = None) -> torch.device:
    """The device of the first tensor or module in ``args``, ``kwargs`` (or a list), else ours."""
    for value in (*args, *(kwargs or {}).values()):
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, torch.Tensor):
                return v.device
            if isinstance(v, torch.nn.Module):
                for p in v.parameters():
                    return p.device
    return globals()["device"]()


def physical(dev: torch.device) -> torch.device:
    """``cuda`` as the ``cuda:N`` it means right now; other devices unchanged."""
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def sync(device: str | torch.device | torch.Tensor | None = None) -> None:
    """Wait until all work queued on ``device`` has finished."""
    if isinstance(device, torch.Tensor):
        dev = device.device
    else:
        dev = resolve(device)  # None, a str or a torch.device; anything else is a TypeError
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def device_name(dev: torch.device) -> str:
    """What the device calls itself: the GPU's name, or the CPU's model name."""
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return _cpu_name()  # an Apple GPU's name is its chip's, the CPU's


def _cpuinfo(*keys: str) -> str | None:
    """The first /proc/cpuinfo line starting with one of ``keys``, after its colon (Linux only)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(keys):
                return line.split(":", 1)[1].strip()
    return None


def _cpu_name() -> str:
    if name := _cpuinfo("model name"):  # Linux; elsewhere fall back to platform
        return name
    if platform.system() == "Darwin":
        import subprocess

        sysctl = ["sysctl", "-n", "machdep.cpu.brand_string"]  # "Apple M2 Pro"
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if name := subprocess.run(sysctl, capture_output=True, text=True, timeout=2).stdout:
                return name.strip()
    return platform.processor() or platform.machine() or "cpu"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (``avx512_bf16``, ``amx_bf16``; empty off Linux)."""
    return frozenset((_cpuinfo("flags", "Features") or "").split())


def cpu_clock_hz() -> float | None:
    """The CPU's top clock from cpufreq, else /proc/cpuinfo's (a VM's nominal one); else None."""
    top = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    with contextlib.suppress(OSError, ValueError):
        return float(top.read_text()) * 1e3
    with contextlib.suppress(TypeError, ValueError):
        return float(_cpuinfo("cpu MHz")) * 1e6  # None: a TypeError
    return None


def caches(dev: torch.device | None = None) -> tuple[tuple[str, int], ...]:
    """The data caches in front of memory, nearest first: ``(name, bytes this process holds)``."""
    if dev is not None and dev.type == "cuda":
        return (("L2", int(torch.cuda.get_device_properties(dev).L2_cache_size)),)
    found = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind, level = (index / "type").read_text().strip(), (index / "level").read_text()
            size, shared = (index / "size").read_text().strip(), (index / "shared_cpu_list")
            cpus = shared.read_text().strip()
        except OSError:
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if kind == "Instruction" or not m:
            continue
        nbytes = int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
        copies = max(1, torch.get_num_threads() // _count_cpus(cpus))
        found.append((f"L{int(level)}", nbytes * copies))
    return tuple(sorted(found, key=lambda c: c[1]))


def _count_cpus(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as ``0-1,4`` names."""
    total = 0
    for part in filter(None, cpu_list.split(",")):
        first, _, last = part.partition("-")
        total += int(last or first) - int(first) + 1
    return max(total, 1)


def last_level_cache_bytes(dev: torch.device | None = None) -> int:
    """Bytes of the largest cache in front of memory (:func:`caches`; 32 MiB where unknown)."""
    found = caches(dev)
    return found[-1][1] if found else 32 * 2**20


def available_memory_bytes(dev: torch.device) -> int:
    """Bytes that can be allocated on ``dev`` right now (an estimate)."""
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    if dev.type == "mps":
        return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    import psutil

    return int(psutil.virtual_memory().available)


#: A measurement may use at most this fraction of the memory free now (the rest: Python, plots).
MEMORY_HEADROOM = 0.5


def _refuse_over_headroom(
    nbytes: float, dev: torch.device, what: str, smaller: str, error=ValueError
):
    """Raise ``error`` when ``what`` needs over ``MEMORY_HEADROOM`` of ``dev``'s free memory."""
    free = available_memory_bytes(dev)
    if nbytes > MEMORY_HEADROOM * free:
        needs, has = _fmt.binary_bytes(nbytes), _fmt.binary_bytes(free)
        fix = f"pick a smaller {smaller}"
        raise error(
            f"{what} needs {needs}, over {MEMORY_HEADROOM:.0%} of {has} free on {dev.type}: {fix}"
        )


def is_out_of_memory(exc: BaseException) -> bool:
    """True for the errors torch raises when an allocation fails (CUDA, MPS or the CPU)."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def release_cached_memory(dev: torch.device | None = None) -> None:
    """Give memory held by dead tensors back: after an out-of-memory error, say."""
    import gc

    gc.collect()
    cuda = dev is None or dev.type == "cuda"
    if cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if (dev is None or dev.type == "mps") and torch.backends.mps.is_available():
        torch.mps.empty_cache()
