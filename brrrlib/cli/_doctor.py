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
import textwrap
import time
from collections import Counter
from pathlib import Path

from brrrlib import _fmt
from brrrlib._files import course_folder as course_source

__all__ = [
    "REINSTALL",
    "compiler_problem",
    "course_source",
    "doctor",
    "package_version",
    "torch_problem",
]

# The oldest torch that passes every test and notebook (.ci/torch_range.py): torch.Tag.reduction,
# which counting uses, arrived in 2.10. pyproject.toml says the same (tests/test_cli.py checks).
_TORCH_FLOOR = "2.10"
REINSTALL = "reinstall the package (pip install brrrlib, or pip install -e . in the clone)"
_REQUIRED = ("numpy", "matplotlib", "ipywidgets", "jupyterlab")
_OPTIONAL = ("nbval", "pytest")  # the tests'
_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# PyPI's Windows wheel is the CPU build; pytorch.org/get-started names the CUDA for a driver.
_CUDA_INDEX = "https://download.pytorch.org/whl/cu128"
_LINUX_COMPILERS = {  # a distribution's ID or ID_LIKE -> how it installs g++
    "debian ubuntu": "sudo apt install build-essential",
    "fedora rhel centos": "sudo dnf install gcc-c++",
    "arch": "sudo pacman -S gcc",
    "suse": "sudo zypper install gcc-c++",
    "alpine": "sudo apk add build-base",
}


class _Report:
    """Prints findings as tagged lines, advice under them, and counts each tag."""

    def __init__(self, out) -> None:
        self.out, self.tags = out, Counter()

    def __call__(self, tag: str, text: str, advice: str = "") -> None:
        self.tags[tag] += 1
        print(f"  {tag:<5} {text}" + (f"\n        -> {advice}" if advice else ""), file=self.out)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    """The installed distribution's version, else the source tree's ``brrrlib.__version__``."""
    return _version("brrrlib") or getattr(sys.modules.get("brrrlib"), "__version__", "unknown")


def _torch_command(flag: str = "") -> str:
    """``pip install{flag} torch`` for the build this machine needs (CUDA, CPU or Apple's)."""
    system, gpu = platform.system(), shutil.which("nvidia-smi") is not None
    index = ""
    if system == "Windows" and gpu:  # PyPI's Windows wheel is the CPU build
        index = f" --index-url {_CUDA_INDEX}"
    elif system not in ("Windows", "Darwin") and not gpu:  # PyPI's Linux wheel is the CUDA build
        index = f" --index-url {_CPU_INDEX}"
    return f"pip install{flag} torch{index}"


def _release(version: str) -> tuple[int, ...]:
    """``"2.10.0+cu128"`` -> ``(2, 10, 0)``."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def torch_problem() -> str | None:
    """None if torch imports and is new enough; else one sentence: what is wrong, what to do."""
    try:
        torch = importlib.import_module("torch")
    except Exception as err:  # a broken install fails in many ways: name it, never hide it
        if isinstance(err, ModuleNotFoundError) and err.name == "torch":
            return f"torch is not installed: {_torch_command()}"
        fix = _torch_command(" --force-reinstall")
        return f"torch is broken ({type(err).__name__}: {err}): {fix}"
    version = getattr(torch, "__version__", "0")
    if _release(version) < _release(_TORCH_FLOOR):
        return f"torch {version} is older than {_TORCH_FLOOR}: {_torch_command(' -U')}"
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


def _check_packages(r: _Report) -> bool:
    """One line per package; True if torch imports (nothing else runs without it)."""
    print("Packages", file=r.out)
    r("ok", f"Python {platform.python_version()} {sys.executable}")
    problem = torch_problem()  # else its own version, with its build: 2.15.0+cu132, +cpu
    r(*(("FAIL", problem) if problem else ("ok", f"torch {sys.modules['torch'].__version__}")))
    for name in _REQUIRED + _OPTIONAL:
        v = _version(name)
        if v is None:
            r("FAIL" if name in _REQUIRED else "WARN", f"{name} missing", f"pip install {name}")
        else:
            r("ok", f"{name} {v}")
    r("ok", f"brrrlib {package_version()}")
    return problem is None


def _check_device(r: _Report):
    import torch

    from brrrlib import machine

    print("Device", file=r.out)
    try:
        dev = machine.device()
    except ValueError as err:
        return r("FAIL", str(err), "unset BRRR_DEVICE")
    r("ok", f"{dev.type} {machine.device_name(dev)}, {torch.get_num_threads()} CPU threads")
    gpu = dev.type == "cpu" and shutil.which("nvidia-smi")
    if gpu and torch.version.cuda is None:
        r("WARN", f"NVIDIA GPU, torch {torch.__version__}", _torch_command(" --force-reinstall"))
    elif gpu and "BRRR_DEVICE" not in os.environ:
        r("WARN", f"NVIDIA GPU, CUDA {torch.version.cuda} unavailable", "check the driver")
    return dev


def _check_compile(r: _Report, dev, quick: bool) -> bool | None:
    """A C++ compiler (a lookup), then unless ``quick`` a tiny compile; None when not tried."""
    import torch

    print("torch.compile", file=r.out)
    missing = compiler_problem()
    if missing:
        r("FAIL", *missing)
        return False
    if quick:
        r("ok", "C++ compiler found (--quick)")
        return None
    t0, x = time.perf_counter(), torch.randn(1024, device=dev)
    try:
        right = torch.allclose(torch.compile(lambda x: (x.sin() + 1).cos())(x), (x.sin() + 1).cos())
    except Exception as err:  # any compiler failure is reported with advice, never hidden
        what = f"torch.compile failed: {type(err).__name__}: {_fmt.error_line(err)}"
        r("FAIL", what, _compiler_advice(platform.system()))
        return False
    if right:
        r("ok", f"compiled in {_fmt.seconds(time.perf_counter() - t0)}")
    else:
        r("FAIL", "torch.compile: wrong result", "pip install -U torch")
    return right


def _check_ceilings(r: _Report, dev, refresh: bool) -> None:
    from brrrlib.ceilings import measure_ceilings
    from brrrlib.parts import cpu_parts

    print("Ceilings", file=r.out)
    try:
        c = measure_ceilings(dev, refresh=refresh, progress=True)
    except OSError as err:
        return r("FAIL", f"ceilings: {err}", "set BRRR_CACHE_DIR to a folder of yours")
    s = c.nearest_spec()
    rows = [
        ("matmul fp32", c.matmul_flops_per_s, s.peak("fp32"), "FLOP/s"),
        ("vector fp32", c.vector_flops_per_s, s.peak("fp32") / 2, "FLOP/s"),
        ("bandwidth", c.mem_bandwidth_bytes_per_s, s.mem_bandwidth_bytes_per_s, "B/s"),
        ("ridge point", c.ridge_point_flops_per_byte(), s.ridge_point_flops_per_byte(), "FLOP/B"),
    ]
    if "bf16" in s.peak_flops_per_s and "bf16" in c.matmul_flops_per_s_by_dtype:
        rows.append(("matmul bf16", c.matmul_peak("bf16"), s.peak("bf16"), "FLOP/s"))
    table = [(n, _fmt.si(h, u), _fmt.si(t, u), _fmt.times(t / h)) for n, h, t, u in rows]
    table = _fmt.text_table(("", "here", f"{s.name} (spec)", "spec/here"), table, align="lrrr")
    print(textwrap.indent(f"{c!r}\n{table}", "        "), file=r.out)
    parts = cpu_parts(c.num_threads) if c.device == "cpu" else None
    if parts is not None:  # the CPU roofs as the clock each implies on the chip's parts
        matmul = parts.implied_clock_hz(c.matmul_flops_per_s, 2) / 1e9
        vector = parts.implied_clock_hz(c.vector_flops_per_s, 1) / 1e9
        r("", f"{parts}: matmul, vector need {matmul:.2f}, {vector:.2f} GHz")
    if c.noisy:
        r("WARN", "ceilings noisy (notes above)", "close programs; brrr doctor --refresh")


def _notebook_imports(nb: dict) -> set[str]:
    """Modules a notebook's code cells import at their top level (not under an ``if``)."""
    names = set()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        lines = "".join(cell.get("source", [])).splitlines()  # %magic and !shell: pass
        try:
            tree = ast.parse("\n".join(re.sub(r"^(\s*)[%!].*", r"\1pass", s) for s in lines))
        except SyntaxError:
            continue  # a deliberately broken exercise cell: not an import problem
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _check_course(r: _Report, compile_ok: bool | None) -> None:
    print("Notebooks", file=r.out)
    src = course_source()
    if src is None:
        return r("FAIL", "notebooks not found", REINSTALL)
    r("ok", str(src))
    for path in sorted(src.glob("*.ipynb")):
        try:
            text = path.read_text(encoding="utf-8")
            imports = _notebook_imports(json.loads(text))
        except (OSError, ValueError) as err:
            r("FAIL", f"{path.name}: {err}", REINSTALL)
            continue
        missing = " ".join(sorted(m for m in imports if importlib.util.find_spec(m) is None))
        compiles = "torch.compile" in text
        if missing:
            r("FAIL", f"{path.name} needs {missing}", f"pip install {missing}")
        elif compiles and compile_ok is False:
            r("FAIL", f"{path.name} needs torch.compile")
        else:
            r("ok", path.name + " (torch.compile untried)" * (compiles and compile_ok is None))


def doctor(refresh: bool = False, quick: bool = False, out=None) -> int:
    """Check that the course can run here, saying what to fix; 0 if it can, 1 if not."""
    r = _Report(out or sys.stdout)
    if _check_packages(r):  # without torch nothing else can run
        dev, compile_ok = _check_device(r), None
        if dev is not None:
            compile_ok = _check_compile(r, dev, quick)
            _check_ceilings(r, dev, refresh)
        _check_course(r, compile_ok)
    fails, warns = r.tags["FAIL"], r.tags["WARN"]
    next_step = "fix the FAIL lines" if fails else "next: brrr lab"
    print(f"{fails} FAIL, {warns} WARN; {next_step}", file=r.out)
    return 1 if fails else 0
