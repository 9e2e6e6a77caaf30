"""import brrrlib is light: modules load on first use, and a missing torch is said in words."""

import inspect
import subprocess
import sys
from pathlib import Path

import brrrlib as bl

_LIBRARY = Path(bl.__file__).parent

# A meta path finder that makes `import torch` fail, as on a machine without it.
_NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
sys.meta_path.insert(0, NoTorch())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _NO_TORCH + code], capture_output=True, text=True, timeout=60
    )


def test_import_does_not_load_torch_until_a_measuring_name_is_used():
    out = _run("import brrrlib as bl; print(bl.__version__); print('torch' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [bl.__version__, "False"]


def test_a_missing_torch_is_one_clear_message():
    out = _run(
        "import brrrlib as bl\n"
        "try:\n    bl.benchmark\nexcept ImportError as e:\n    print('IMPORT', e)\n"
    )
    assert out.returncode == 0, out.stderr
    assert "IMPORT" in out.stdout and "PyTorch" in out.stdout and "installed" in out.stdout
    assert "download.pytorch.org/whl/cpu" in out.stdout  # the build for this machine


def test_every_public_name_is_its_modules_and_documented():
    """A module name gives the module; any other name is in its module's __all__, with a docstring."""
    modules = {n for n in bl.__all__ if (_LIBRARY / f"{n}.py").exists() or (_LIBRARY / n).is_dir()}
    for name in set(bl.__all__) - modules - {"__version__"}:
        obj = getattr(bl, name)
        homes = [m for m in modules if name in getattr(getattr(bl, m), "__all__", ())]
        assert homes and all(getattr(getattr(bl, m), name) is obj for m in homes), name
        doc = inspect.getdoc(obj) or ""
        # a dataclass without a docstring gets its signature as one: that does not count
        assert doc and not doc.startswith(f"{name}("), name
    for module in modules:
        assert getattr(bl, module).__name__ == f"brrrlib.{module}", module
