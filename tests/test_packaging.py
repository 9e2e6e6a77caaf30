"""The project's packaging agrees with itself: pyproject, environment.yml, README, CI."""

import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

# conda-forge names that differ from PyPI's
CONDA_TO_PYPI = {"pytorch": "torch"}


def _name(requirement: str) -> str:
    """The bare package name of a requirement such as ``torch>=2.3`` or ``ipywidgets >=8``."""
    return re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower()


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _conda_dependencies() -> list[str]:
    """The conda (non-pip) dependencies listed in environment.yml, read without a YAML library."""
    names, in_deps = [], False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith(" "):
            in_deps = stripped == "dependencies:"
            continue
        if in_deps and re.match(r"^  - ", line):  # top-level items only (pip's sub-list is deeper)
            names.append(stripped[4:])
    return names


def test_environment_yml_names_the_same_runtime_packages_as_pyproject():
    runtime = {_name(r) for r in _pyproject()["project"]["dependencies"]}
    conda = {CONDA_TO_PYPI.get(_name(d), _name(d)) for d in _conda_dependencies()}
    conda -= {"python", "pip", "pip:"}
    assert conda == runtime, f"environment.yml vs pyproject.toml differ: {conda ^ runtime}"


def test_environment_yml_installs_the_project_itself_editable():
    text = (ROOT / "environment.yml").read_text()
    assert "conda-forge" in text
    assert (
        "defaults" not in text
        and "  - pytorch\n" not in text.split("channels:")[1].split("dependencies:")[0]
    )
    assert re.search(r"-\s+(--editable|-e)\s+\.(\[test\])?\s*$", text, re.M)


def test_test_extra_has_the_tools_the_test_command_uses():
    test_extra = {_name(r) for r in _pyproject()["project"]["optional-dependencies"]["test"]}
    assert {"pytest", "nbval", "ruff"} <= test_extra


def test_readme_commands_are_what_ci_runs():
    """CI runs README's test command verbatim; both commands exist and install the project."""
    read = [sys.executable, str(ROOT / ".ci" / "readme_command.py")]
    lab = subprocess.run([*read, "lab"], capture_output=True, text=True, check=True).stdout
    test = subprocess.run([*read, "test"], capture_output=True, text=True, check=True).stdout
    assert "pip install -e ." in lab and "brrr lab" in lab
    assert 'pip install -e ".[test]"' in test and "ruff check" in test and "pytest" in test
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_command.py test" in ci and "torch==2.13.0" in ci


def test_console_script_points_at_a_main_function():
    target = _pyproject()["project"]["scripts"]["brrr"]
    module, func = target.split(":")
    assert module == "brrrlib.cli" and func == "main"
    import brrrlib.cli

    assert callable(getattr(brrrlib.cli, func))


def test_public_names_have_docstrings():
    """Every name in brrrlib.__all__ (and each module's own __all__) carries a docstring."""
    import importlib
    import inspect

    missing = []
    for mod_name in [
        "brrrlib",
        *[f"brrrlib.{m.stem}" for m in (ROOT / "brrrlib").glob("[!_]*.py")],
    ]:
        mod = importlib.import_module(mod_name)
        if not inspect.getdoc(mod):
            missing.append(mod_name)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if name.startswith("__") or not (
                inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj)
            ):
                continue
            doc = inspect.getdoc(obj) or ""
            # a dataclass without a docstring gets its signature as one: that does not count
            if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):
                missing.append(f"{mod_name}.{name}")
    assert not missing, f"public names without docstrings: {missing}"
