"""``brrr doctor``: can this machine run the course, and if not, what to do."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from brrrlib import _fmt

__all__ = ["CHECKS", "NO_COURSE", "compiler_problem", "package_version", "torch_problem"]

# The oldest torch that passes every test and notebook (.ci/torch_range.py): torch.Tag.reduction,
# which counting uses, arrived in 2.10. pyproject.toml says the same (tests/test_cli.py checks).
_TORCH_FLOOR = (2, 10)
REINSTALL = "reinstall the package (pip install brrrlib, or pip install -e . in the clone)"
NO_COURSE = ("course notebooks not found", REINSTALL)  # brrr doctor's FAIL, brrr lab's refusal
_UNTRIED = "torch.compile untried"
_REQUIRED = ("numpy", "matplotlib", "ipywidgets", "jupyterlab")
_OPTIONAL = ("nbval", "pytest")  # the tests'
# pytorch.org/get-started names the CUDA build (cu128) for a driver
_INDEX = "https://download.pytorch.org/whl/"
_LINUX_COMPILERS = {  # a distribution's ID or ID_LIKE -> how it installs g++
    "debian ubuntu": "sudo apt install build-essential",
    "fedora rhel centos": "sudo dnf install gcc-c++",
    "arch": "sudo pacman -S gcc",
    "suse": "sudo zypper install gcc-c++",
    "alpine": "sudo apk add build-base",
}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    """The installed distribution's version, else the source tree's ``brrrlib.__version__``."""
    return _version("brrrlib") or getattr(sys.modules.get("brrrlib"), "__version__", "unknown")


def _pip(what: str) -> str:
    """The one way doctor says to install something: ``pip install {what}``."""
    return f"pip install {what}"


def _torch_command(flag: str = "") -> str:
    """``pip install {flag}torch`` for the build this machine needs (CUDA, CPU or Apple's)."""
    system, gpu = platform.system(), shutil.which("nvidia-smi") is not None
    # PyPI's wheel is the CPU build on Windows, the CUDA build on Linux, MPS's on a Mac
    wheel = ("cu128" if gpu else "") if system == "Windows" else ("" if gpu else "cpu")
    index = f" --index-url {_INDEX}{wheel}" if wheel and system != "Darwin" else ""
    return _pip(f"{flag}torch{index}")


def torch_problem() -> str | None:
    """None if torch imports and is new enough; else one sentence: what is wrong, what to do."""
    try:
        torch = importlib.import_module("torch")
    except Exception as err:  # a broken install fails in many ways: name it, never hide it
        if isinstance(err, ModuleNotFoundError) and err.name == "torch":
            return f"torch is not installed: {_torch_command()}"
        fix = _torch_command("--force-reinstall ")
        return f"torch is broken ({type(err).__name__}: {err}): {fix}"
    version = getattr(torch, "__version__", "0")  # 2.10.0+cu128, 2.10.0a0+git...: (2, 10, 0)
    release = tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])
    if release < _TORCH_FLOOR:
        floor = ".".join(map(str, _TORCH_FLOOR))
        return f"torch {version} is older than {floor}: {_torch_command('-U ')}"
    return None


def compiler_problem() -> tuple[str, str] | None:
    """(what is missing, how to install it) when torch.compile's C++ compiler is not found."""
    system = platform.system()
    compiler = os.environ.get("CXX") or {"Darwin": "clang++", "Windows": "cl"}.get(system, "g++")
    found = shutil.which(compiler)
    if found and system == "Darwin" and not os.environ.get("CXX"):  # not the /usr/bin stub
        found = subprocess.run(["xcode-select", "-p"], capture_output=True).returncode == 0
    return None if found else (f"no C++ compiler ({compiler}) on PATH", _compiler_advice(system))


def _compiler_advice(system: str) -> str:
    """How to install a C++ compiler here, in one line: conda, macOS, Windows or a Linux."""
    if (Path(sys.prefix) / "conda-meta").is_dir():
        return "conda install -c conda-forge cxx-compiler"
    if system == "Darwin":
        return "xcode-select --install"
    if system == "Windows":
        return "Visual Studio Build Tools (C++), then the x64 Native Tools prompt; or WSL"
    try:
        distro = platform.freedesktop_os_release()
    except OSError:
        distro = {}
    family = set(f"{distro.get('ID', '')} {distro.get('ID_LIKE', '')}".split())
    known = (cmd for ids, cmd in _LINUX_COMPILERS.items() if family & set(ids.split()))
    return next(known, "install g++ with your system's package manager")


def _packages(found: dict):
    """Python, torch and the packages the course imports; found["torch"]: torch imports."""
    yield "ok", f"Python {platform.python_version()} {sys.executable}"
    problem = torch_problem()  # else its own version, with its build: 2.15.0+cu132, +cpu
    found["torch"] = problem is None
    yield ("FAIL", problem) if problem else ("ok", f"torch {sys.modules['torch'].__version__}")
    for name in _REQUIRED + _OPTIONAL:
        v, bad = _version(name), "FAIL" if name in _REQUIRED else "WARN"
        yield ("ok", f"{name} {v}") if v else (bad, f"{name} missing", _pip(name))
    yield "ok", f"brrrlib {package_version()}"


def _device(found: dict):
    """The device brrr measures on (found["device"]), and an NVIDIA GPU torch cannot use."""
    import torch

    from brrrlib import machine

    try:
        dev = found["device"] = machine.device()
    except ValueError as err:
        yield "FAIL", str(err), "unset BRRR_DEVICE"
        return
    yield "ok", f"{dev.type} {machine.device_name(dev)} threads={torch.get_num_threads()}"
    gpu, cuda = dev.type == "cpu" and shutil.which("nvidia-smi"), torch.version.cuda
    if gpu and not (cuda and "BRRR_DEVICE" in os.environ):  # cuda None: a CPU build of torch
        fix = "check the driver" if cuda else _torch_command("--force-reinstall ")
        yield "WARN", f"NVIDIA GPU unused: torch {torch.__version__}, CUDA {cuda}", fix


def _compile(found: dict):
    """A C++ compiler (a lookup), then unless quick a tiny compile: found["compiles"]."""
    import torch

    missing = compiler_problem()
    found["compiles"] = None if found["quick"] and not missing else False  # None: untried
    if missing or found["quick"]:
        yield ("FAIL", *missing) if missing else ("ok", f"{_UNTRIED} (--quick)")
        return
    t0, x = time.perf_counter(), torch.randn(1024, device=found["device"])
    try:  # any failure is reported with advice, never hidden; a wrong result: AssertionError
        torch.testing.assert_close(torch.compile(lambda x: x.sin().cos())(x), x.sin().cos())
    except Exception as err:
        wrong = isinstance(err, AssertionError)  # torch's bug, else the compiler's
        fix = _torch_command("-U ") if wrong else _compiler_advice(platform.system())
        yield "FAIL", f"{type(err).__name__}: {_fmt.error_line(err)}", fix
        return
    found["compiles"] = True
    yield "ok", f"torch.compile {_fmt.seconds(time.perf_counter() - t0)}"


def _ceilings(found: dict):
    """The measured ceilings beside the nearest spec sheet's, and the clocks they imply."""
    from brrrlib.ceilings import measure_ceilings
    from brrrlib.parts import cpu_parts

    try:
        c = measure_ceilings(found["device"], refresh=found["refresh"], progress=True)
    except OSError as err:
        yield "FAIL", f"ceilings: {err}", "set BRRR_CACHE_DIR to a folder of yours"
        return
    s = c.nearest_spec()
    rows = [  # (ceiling, precision, here, spec sheet, unit)
        ("matmul", "fp32", c.matmul_flops_per_s, s.peak("fp32"), "FLOP/s"),
        ("vector", "fp32", c.vector_flops_per_s, s.peak("fp32") / 2, "FLOP/s"),
        ("bandwidth", "", c.mem_bandwidth_bytes_per_s, s.mem_bandwidth_bytes_per_s, "B/s"),
        ("ridge", "fp32", c.ridge_point_flops_per_byte(), s.ridge_point_flops_per_byte(), "FLOP/B"),
    ]
    if "bf16" in s.peak_flops_per_s and "bf16" in c.matmul_flops_per_s_by_dtype:
        rows.append(("matmul", "bf16", c.matmul_peak("bf16"), s.peak("bf16"), "FLOP/s"))
    table = [[n, p, _fmt.si(h, u), _fmt.si(t, u), _fmt.times(t / h), ""] for n, p, h, t, u in rows]
    parts = cpu_parts(c.num_threads) if c.device == "cpu" else None
    if parts is not None:  # the CPU roofs as the clock each needs on the chip's parts
        table[0][5] = _fmt.si(parts.implied_clock_hz(c.matmul_flops_per_s, 2), "Hz")
        table[1][5] = _fmt.si(parts.implied_clock_hz(c.vector_flops_per_s, 1), "Hz")
    header = ("", "", "here", f"{s.name} (spec)", "spec/here", "clock" * bool(parts))
    yield "", "\n".join([repr(c), _fmt.text_table(header, table, "llrrrr"), str(parts or "")])
    if c.noisy:
        yield "WARN", "ceilings noisy (notes above)", "close programs; brrr doctor --refresh"


def _notebook_imports(nb: dict) -> set[str]:
    """Modules a notebook's code cells import at their top level (not under an ``if``)."""
    names = set()
    for cell in (c for c in nb.get("cells", []) if c.get("cell_type") == "code"):
        source = "".join(cell.get("source", []))  # %magic and !shell lines: pass
        try:
            tree = ast.parse(re.sub(r"^(\s*)[%!].*", r"\1pass", source, flags=re.M))
        except SyntaxError:
            continue  # a deliberately broken exercise cell: not an import problem
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _notebooks(found: dict):
    """Each chapter: are its imports installed, does it need a torch.compile that fails."""
    src, compiles = found["course"], found.get("compiles")
    if src is None:
        yield "FAIL", *NO_COURSE
        return
    yield "ok", str(src)
    for path in sorted(src.glob("*.ipynb")):
        try:
            text = path.read_text(encoding="utf-8")
            imports = _notebook_imports(json.loads(text))
        except (OSError, ValueError) as err:
            yield "FAIL", f"{path.name}: {err}", REINSTALL
            continue
        missing = " ".join(sorted(m for m in imports if importlib.util.find_spec(m) is None))
        needs = "torch.compile" in text
        if missing or (needs and compiles is False):
            fix = [_pip(missing)] * bool(missing)
            yield "FAIL", f"{path.name} needs {missing or 'torch.compile'}", *fix
        else:
            yield "ok", path.name + f" ({_UNTRIED})" * (needs and compiles is None)


#: ``brrr doctor``'s sections in order: (header, check, what an earlier check must have found).
#: A check yields (tag, text) or (tag, text, advice) and records in ``found`` what it learnt.
CHECKS = (
    ("Packages", _packages, None),
    ("Device", _device, "torch"),
    ("torch.compile", _compile, "device"),
    ("Ceilings", _ceilings, "device"),
    ("Notebooks", _notebooks, "torch"),
)
