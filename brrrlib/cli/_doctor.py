"""``brrr doctor``: can this machine run the course, and if not, what to do."""

from __future__ import annotations

import ast
import importlib
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
from brrrlib._files import course_folder as course_source

__all__ = [
    "compiler_problem",
    "course_source",
    "cuda_torch_command",
    "doctor",
    "REINSTALL",
    "package_version",
    "torch_problem",
]

# The oldest torch that passes every test and notebook (.ci/torch_range.py): torch.Tag.reduction,
# which counting uses, arrived in 2.10. pyproject.toml says the same (tests/test_cli.py checks).
_TORCH_FLOOR = "2.10"

#: What to do when the course notebooks are missing (``brrr doctor``, ``brrr lab``).
REINSTALL = "reinstall the package (pip install brrrlib, or pip install -e . in the clone)"

# Packages the notebooks need (required) and the test tools (optional).
_REQUIRED = ("torch", "numpy", "matplotlib", "ipywidgets", "jupyterlab")
_OPTIONAL = ("nbval", "pytest")


class _Report:
    """Doctor's findings, one tagged line each; FAIL lines make the exit status 1."""

    def __init__(self, out) -> None:
        self.out, self.failures, self.warnings = out, 0, 0

    def line(self, tag: str, text: str, advice: str = "") -> None:
        self.failures += tag == "FAIL"
        self.warnings += tag == "WARN"
        advice = f"\n        -> {advice}" if advice else ""
        print(f"  {tag:<5} {text}{advice}", file=self.out)

    def section(self, title: str) -> None:
        print(f"\n{title}", file=self.out)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    """The installed distribution's version, else the source tree's ``brrrlib.__version__``."""
    return _version("brrrlib") or getattr(sys.modules.get("brrrlib"), "__version__", "unknown")


_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# A CUDA build for Windows (PyPI's Windows wheel is the CPU build): a CUDA version torch's
# recent releases are built for; pytorch.org/get-started names the one for your driver.
_CUDA_INDEX = "https://download.pytorch.org/whl/cu128"


def _torch_advice() -> str:
    """The install command for this machine's torch build: Apple, CUDA or CPU, per system."""
    system = platform.system()
    if system == "Darwin":
        return "for this machine (Apple: MPS is in the default wheel): pip install torch"
    if shutil.which("nvidia-smi"):
        if system == "Windows":  # PyPI's Windows wheel has no CUDA
            return (
                "for this machine (CUDA on Windows: PyPI's wheel is the CPU build): pip install "
                f"torch --index-url {_CUDA_INDEX} (pytorch.org/get-started names the CUDA "
                "version for your driver)"
            )
        return "for this machine (CUDA: an NVIDIA GPU is here): pip install torch"
    if system == "Windows":  # PyPI's Windows wheel is the CPU build already
        return "for this machine (CPU on Windows: no NVIDIA GPU): pip install torch"
    return f"for this machine (CPU: no NVIDIA GPU): pip install torch --index-url {_CPU_INDEX}"


def cuda_torch_command() -> str:
    """The command that replaces a CPU build of torch by a CUDA one, on this system."""
    if platform.system() == "Windows":
        return f"pip install --force-reinstall torch --index-url {_CUDA_INDEX}"
    return "pip install --force-reinstall torch  (PyPI's Linux wheel is the CUDA build)"


def torch_problem() -> str | None:
    """None if torch imports and is new enough; else one sentence: what is wrong, what to do."""
    try:
        torch = importlib.import_module("torch")
    except Exception as err:  # a broken install fails in many ways: name it, never hide it
        if isinstance(err, ModuleNotFoundError) and err.name == "torch":
            return f"torch is not installed: install it {_torch_advice()}"
        what = f"{type(err).__name__}: {err}"
        return f"torch cannot be imported ({what}): reinstall it {_torch_advice()}"
    version = getattr(torch, "__version__", "0")
    if _release(version) >= _release(_TORCH_FLOOR):
        return None
    upgrade = _torch_advice().replace("pip install torch", "pip install -U torch")
    return (
        f"torch {version} is older than {_TORCH_FLOOR}, the oldest the course runs on: "
        f"upgrade it {upgrade}"
    )


def _release(version: str) -> tuple[int, ...]:
    """``"2.10.0+cu128"`` -> ``(2, 10, 0)``: the numeric release part of a version."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def _check_packages(r: _Report) -> bool:
    """One line per package; True if torch imports (nothing else runs without it)."""
    r.section("Python and packages")
    r.line("ok", f"Python {platform.python_version()} ({sys.executable})")
    problem = torch_problem()
    for name in _REQUIRED + _OPTIONAL:
        v = _version(name)
        if name == "torch" and not problem:  # torch's own, with its build: 2.15.0+cu132, +cpu
            v = getattr(sys.modules.get("torch"), "__version__", v)
        if name == "torch" and problem:
            r.line("FAIL", problem, "then run brrr doctor again")
        elif v is None and name in _REQUIRED:
            r.line("FAIL", f"{name} is not installed", f"pip install {name}  (or pip install -e .)")
        elif v is None:
            r.line(
                "WARN",
                f"{name} is not installed (only the tests need it)",
                "pip install -e '.[test]'",
            )
        else:
            r.line("ok", f"{name} {v}")
    r.line("ok", f"brrrlib {package_version()}")
    return problem is None


def _check_device(r: _Report):
    import torch

    from brrrlib import machine

    r.section("Device")
    try:
        dev = machine.device()
    except ValueError as err:
        r.line("FAIL", str(err), "fix or unset the BRRR_DEVICE environment variable")
        return None
    if dev.type == "cuda":
        r.line("ok", f"cuda: {torch.cuda.get_device_name(dev)} (CUDA {torch.version.cuda})")
    elif dev.type == "mps":
        r.line("ok", "mps: Apple GPU")
    else:
        r.line("ok", f"cpu: {machine.device_name(dev)}, {torch.get_num_threads()} threads")
        if shutil.which("nvidia-smi") and torch.version.cuda is None:
            r.line(
                "WARN",
                f"an NVIDIA GPU is here, but torch {torch.__version__} is a CPU build",
                f"to use the GPU: {cuda_torch_command()}",
            )
        elif shutil.which("nvidia-smi") and "BRRR_DEVICE" not in os.environ:
            r.line(
                "WARN",
                f"an NVIDIA GPU is here and torch is a CUDA {torch.version.cuda} build, but "
                "CUDA is not available to it",
                "check the driver: nvidia-smi must work, and be new enough for that CUDA",
            )
        else:
            r.line("", "no GPU: every chapter runs on the CPU; GPU-only cells show predictions")
    return dev


def compiler_problem() -> tuple[str, str] | None:
    """(what is missing, how to install it) when torch.compile's C++ compiler is not found."""
    system = platform.system()
    default = {"Darwin": "clang++", "Windows": "cl"}.get(system, "g++")
    compiler = os.environ.get("CXX") or default
    found = shutil.which(compiler)
    if found and system == "Darwin" and not os.environ.get("CXX"):  # not the /usr/bin stub
        tools = subprocess.run(["xcode-select", "-p"], capture_output=True, text=True)
        found = found if tools.returncode == 0 else None
    if found:
        return None
    return f"no C++ compiler ({compiler}) on this machine's PATH", _compiler_advice(system)


def _compiler_advice(system: str) -> str:
    """How to install a C++ compiler here, in one line: conda, macOS, Windows or a Linux."""
    if (Path(sys.prefix) / "conda-meta").is_dir():
        return "conda install -c conda-forge cxx-compiler"
    if system == "Darwin":
        return "xcode-select --install"
    if system == "Windows":
        return (
            "install Visual Studio Build Tools (the 'Desktop development with C++' workload) "
            "and start brrr from the 'x64 Native Tools Command Prompt', or run the course in WSL"
        )
    try:
        distro = platform.freedesktop_os_release()
    except OSError:
        distro = {}
    family = " ".join([distro.get("ID", ""), distro.get("ID_LIKE", "")])
    for names, command in (
        (("debian", "ubuntu"), "sudo apt install build-essential"),
        (("fedora", "rhel", "centos"), "sudo dnf install gcc-c++"),
        (("arch",), "sudo pacman -S gcc"),
        (("suse",), "sudo zypper install gcc-c++"),
        (("alpine",), "sudo apk add build-base"),
    ):
        if any(name in family for name in names):
            return command
    return "install g++ with your system's package manager (Debian/Ubuntu/WSL: build-essential)"


def _check_compile(r: _Report, dev, quick: bool) -> bool | None:
    """A C++ compiler (a lookup), then unless ``quick`` a tiny compile; None when not tried."""
    import torch

    r.section("torch.compile")
    missing = compiler_problem()
    if missing:
        what = f"{missing[0]}: torch.compile cannot build kernels (chapters 02 and 03 use it)"
        r.line("FAIL", what, missing[1])
        return False
    if quick:
        r.line("ok", "a C++ compiler is here (torch.compile not tried: --quick)")
        return None

    def tiny(x):
        return (x.sin() + 1).cos()

    try:
        t0 = time.perf_counter()
        x = torch.randn(1024, device=dev)
        right = torch.allclose(torch.compile(tiny)(x), tiny(x), atol=1e-5)
        elapsed_s = time.perf_counter() - t0
    except Exception as err:  # any compiler failure is reported with advice, never hidden
        first = (str(err).strip().splitlines() or [""])[0][:200]
        advice = f"{_compiler_advice(platform.system())} (chapters 02 and 03 use torch.compile)"
        r.line("FAIL", f"torch.compile failed: {type(err).__name__}: {first}", advice)
        return False
    if not right:
        r.line("FAIL", "torch.compile gave a wrong result", "update torch: pip install -U torch")
        return False
    took = _fmt.seconds(elapsed_s)
    r.line("ok", f"compiled and ran a tiny function in {took} (first compile; later ones cached)")
    return True


def _check_ceilings(r: _Report, dev, refresh: bool) -> None:
    from brrrlib.ceilings import measure_ceilings

    r.section("Ceilings of this machine (bl.measure_ceilings)")
    try:
        c = measure_ceilings(dev, refresh=refresh, progress=True)
    except OSError as err:
        r.line(
            "FAIL", f"ceilings not measured: {err}", "set BRRR_CACHE_DIR to a folder you can write"
        )
        return
    s = c.nearest_spec()
    rows = [  # (what, measured here, spec sheet, unit)
        ("matmul fp32", c.matmul_flops_per_s, s.peak("fp32"), "FLOP/s"),
        ("vector fp32 (mul)", c.vector_flops_per_s, s.peak("fp32") / 2, "FLOP/s"),
        ("memory bandwidth", c.mem_bandwidth_bytes_per_s, s.mem_bandwidth_bytes_per_s, "B/s"),
        ("ridge point", c.ridge_point_flops_per_byte(), s.ridge_point_flops_per_byte(), "FLOP/B"),
    ]
    if "bf16" in s.peak_flops_per_s:
        bf16 = c.matmul_flops_per_s_by_dtype.get("bf16")
        rows.append(("matmul bf16", bf16, s.peak("bf16"), "FLOP/s"))
    print(f"{'':<26}{'measured here':>16}{s.name + ' (spec)':>22}{'spec/here':>11}", file=r.out)
    for name, here, there, unit in rows:
        here_s, ratio = (_fmt.si(here, unit), _fmt.si(there / here, "x")) if here else ("-", "")
        print(f"{'':<8}{name:<18}{here_s:>16}{_fmt.si(there, unit):>22}{ratio:>11}", file=r.out)
    for pattern in ("read", "copy", "update"):  # the bandwidth roof of each access pattern
        print(
            f"{'':<8}{pattern + ' roof':<18}{_fmt.si(c.bandwidth_for(pattern), 'B/s'):>16}",
            file=r.out,
        )
    print(f"{'':<8}{'op overhead':<18}{_fmt.seconds(c.op_overhead_s):>16}", file=r.out)
    r.line("", f"{c.device_name}, measured {c.measured_at} (cached; --refresh measures again)")
    r.line("", f"spec source: {s.source}")
    _check_parts(r, c)
    if c.noisy:
        r.line("WARN", "; ".join(c.noise_notes()), "close other programs; brrr doctor --refresh")
    else:
        r.line("ok", "measurements were steady (the last rounds of each agreed within 10%)")


def _check_parts(r: _Report, c) -> None:
    """The CPU ceilings beside the peak from the chip's parts, as the clock each implies."""
    from brrrlib.parts import cpu_parts

    parts = cpu_parts(c.num_threads) if c.device == "cpu" else None
    if parts is None:
        return
    r.line("", f"the parts: {parts}")
    for name, rate, per_lane in (
        ("matmul fp32", c.matmul_flops_per_s, 2),
        ("vector fp32", c.vector_flops_per_s, 1),
    ):
        clock = parts.implied_clock_hz(rate, per_lane)
        r.line("", f"{name} {_fmt.si(rate, 'FLOP/s')} needs {clock / 1e9:.2f} GHz on those parts")


def _notebook_imports(nb: dict) -> set[str]:
    """Modules a notebook's code cells import at their top level (not under an ``if``)."""
    names = set()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        lines = "".join(cell.get("source", [])).splitlines()
        src = "\n".join(
            line[: len(line) - len(line.lstrip())] + "pass"
            if line.lstrip().startswith(("%", "!"))
            else line
            for line in lines
        )
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue  # a deliberately broken exercise cell: not an import problem
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _check_course(r: _Report, compile_ok: bool | None) -> None:
    r.section("Course notebooks")
    src = course_source()
    if src is None:
        r.line("FAIL", "course notebooks not found", REINSTALL)
        return
    r.line("ok", f"found in {src}")
    for path in sorted(src.glob("*.ipynb")):
        try:
            text = path.read_text(encoding="utf-8")
            imports = _notebook_imports(json.loads(text))
            missing = sorted(m for m in imports if importlib.util.find_spec(m) is None)
        except (OSError, ValueError) as err:
            r.line("FAIL", f"{path.name}: unreadable ({err})", "brrr lab --reset (keeps a backup)")
            continue
        uses_compile = "torch.compile" in text
        if missing:
            needs = ", ".join(missing)
            r.line("FAIL", f"{path.name}: needs {needs}", f"pip install {' '.join(missing)}")
        elif uses_compile and compile_ok is False:
            r.line("FAIL", f"{path.name}: uses torch.compile, which fails here", "see above")
        else:
            quick = uses_compile and compile_ok is None
            r.line("ok", f"{path.name}: can run" + " (torch.compile not checked: --quick)" * quick)


def doctor(refresh: bool = False, quick: bool = False, out=None) -> int:
    """Check that the course can run here, saying what to fix; 0 if it can, 1 if not."""
    out = out or sys.stdout
    r = _Report(out)
    print("brrr doctor: can this machine run the course?", file=out)
    if not _check_packages(r):
        print(
            "\nCannot go on without torch: install or upgrade it as above, then run brrr doctor again.",
            file=out,
        )
        return 1
    dev = _check_device(r)
    compile_ok = None
    if dev is not None:
        compile_ok = _check_compile(r, dev, quick)
        _check_ceilings(r, dev, refresh)
    _check_course(r, compile_ok)
    verdict = (
        f"{r.failures} problem(s): fix the FAIL lines above, then run brrr doctor again"
        if r.failures
        else "all good: run `brrr lab` to open the course"
    )
    print(f"\n{verdict}" + (f" ({r.warnings} warning(s))" if r.warnings else ""), file=out)
    return 1 if r.failures else 0
