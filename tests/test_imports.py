"""import brrrlib is light: modules load on first use, and a missing torch is said in words."""

import subprocess
import sys

import brrrlib as bl

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


def test_every_public_name_resolves_and_none_shadows_its_module():
    for name in bl.__all__:
        assert getattr(bl, name) is not None
    for module in bl._MODULES:
        assert type(getattr(bl, module)).__name__ == "module", module
    assert bl.diagnosis.REMEDIES and bl.classroom.__name__ == "brrrlib.classroom"
