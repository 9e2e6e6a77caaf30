"""The project's packaging agrees with itself: pyproject, environment.yml, README, CI."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

# conda-forge names that differ from PyPI's
CONDA_TO_PYPI = {"pytorch": "torch", "matplotlib-base": "matplotlib"}


def _name(requirement: str) -> str:
    """The bare package name of a requirement such as ``torch>=2.3`` or ``ipywidgets >=8``."""
    return re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower()


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _conda_list(section: str = "dependencies") -> list[str]:
    """A top-level list of environment.yml (``dependencies``: the conda, non-pip, ones), read
    without a YAML library."""
    names, inside = [], False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith(" "):
            inside = stripped == f"{section}:"
            continue
        if inside and re.match(r"^  - ", line):  # top-level items only (pip's sub-list is deeper)
            names.append(stripped[4:])
    return names


def _conda_dependencies() -> list[str]:
    return _conda_list("dependencies")


# In environment.yml but not a Python package: the compiler torch.compile needs on a CPU.
CONDA_ONLY = {"python", "pip", "pip:", "cxx-compiler"}
TEST_TOOLS = {"pytest", "nbval", "ruff", "playwright"}


def _specifiers(requirements) -> dict[str, str]:
    """``{"torch": ">=2.3", ...}``: each requirement's version part, spaces removed."""
    out = {}
    for r in requirements:
        name = _name(r)
        out[CONDA_TO_PYPI.get(name, name)] = r.strip()[len(name) :].replace(" ", "")
    return out


def test_environment_yml_names_the_same_runtime_packages_as_pyproject():
    runtime = _specifiers(_pyproject()["project"]["dependencies"])
    conda = _specifiers(d for d in _conda_dependencies() if _name(d) not in CONDA_ONLY)
    assert set(conda) == set(runtime), (
        f"environment.yml vs pyproject.toml: {set(conda) ^ set(runtime)}"
    )
    differ = {n: (conda[n], runtime[n]) for n in runtime if conda[n] != runtime[n]}
    assert not differ, f"version bounds differ (environment.yml, pyproject.toml): {differ}"


def test_environment_yml_is_a_learners_environment():
    """The compiler torch.compile needs, the project itself editable, and no test tools."""
    text = (ROOT / "environment.yml").read_text()
    channels = _conda_list("channels")
    assert "conda-forge" in channels and "pytorch" not in channels and "defaults" not in text
    assert "cxx-compiler" in {_name(d) for d in _conda_dependencies()}
    assert re.search(r"-\s+(--editable|-e)\s+\.\s*$", text, re.M), "pip: --editable . (no extras)"
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # comments may name them
    present = {tool for tool in TEST_TOOLS if re.search(rf"\b{tool}\b", code)}
    assert not present and "[test]" not in code, (
        f"test tools in the learners' environment: {present}"
    )


def test_requires_python_agrees_with_ruffs_target():
    floor = _pyproject()["project"]["requires-python"]
    target = _pyproject()["tool"]["ruff"]["target-version"]
    assert floor == ">=3." + target.removeprefix("py3"), (floor, target)


def test_test_extra_has_the_tools_the_test_command_uses():
    test_extra = {_name(r) for r in _pyproject()["project"]["optional-dependencies"]["test"]}
    assert {"pytest", "nbval", "ruff"} <= test_extra


def test_workshop_extra_is_the_hub_and_the_dev_extra_takes_it():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert {_name(r) for r in extras["workshop"]} == {"jupyterhub"}
    assert any("workshop" in r for r in extras["dev"])


def test_docs_extra_builds_the_site_with_pure_python_tools():
    docs = {_name(r) for r in _pyproject()["project"]["optional-dependencies"]["docs"]}
    site = {"sphinx", "myst-nb", "nbclient", "sphinx-book-theme", "sphinx-copybutton"}
    assert docs == site | {"tomli"}  # tomli: docs/conf.py reads pyproject.toml on Python 3.10
    assert (ROOT / "docs" / "conf.py").is_file() and (ROOT / "docs" / "build.py").is_file()


def test_every_recorded_file_ships_in_the_wheel():
    """The recordings (traces, reports, sweeps, executed notebooks) are all package data."""
    recordings = ROOT / "brrrlib" / "recordings"
    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["brrrlib.recordings"]
    shipped = {p for pattern in patterns for p in recordings.glob(pattern)}
    files = {p for p in recordings.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files - shipped == set(), sorted(str(p.relative_to(recordings)) for p in files - shipped)
    assert any(p.suffix == ".ipynb" for p in shipped)


def test_license_file_is_the_license_pyproject_names():
    project = _pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_the_course_ships_as_package_data_not_data_files():
    setuptools = _pyproject()["tool"]["setuptools"]
    assert "data-files" not in setuptools
    assert setuptools["package-dir"] == {"brrrlib.course": "course"}
    assert {"*.ipynb", "*.md"} <= set(setuptools["package-data"]["brrrlib.course"])


def test_readme_commands_are_what_ci_runs():
    """CI runs README's test command verbatim; both commands exist and install the project."""
    read = [sys.executable, str(ROOT / ".ci" / "readme_command.py")]
    lab = subprocess.run([*read, "lab"], capture_output=True, text=True, check=True).stdout
    test = subprocess.run([*read, "test"], capture_output=True, text=True, check=True).stdout
    assert "pip install -e ." in lab and "brrr lab" in lab
    assert 'pip install -e ".[test,workshop]"' in test and "ruff check" in test and "pytest" in test
    assert "npm install -g --prefix .venv configurable-http-proxy" in test  # the hub's proxy
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_command.py" in ci and "torch==2.13.0" in ci  # each name of the loop below
    # the site is built (notebooks executed, links checked) before the tests that open it
    loop = re.search(r"^for name in (.*); do$", ci, re.M)
    assert loop and loop[1].split() == ["site", "test"]
    site = subprocess.run([*read, "site"], capture_output=True, text=True, check=True).stdout
    assert 'pip install -e ".[docs]"' in site and "python docs/build.py" in site


def test_readme_puts_the_torch_for_each_machine_before_the_commands():
    """A CPU-only learner must read the CPU torch line before copying the install command."""
    text = (ROOT / "README.md").read_text()
    first_command = text.index("<!-- command: lab -->")
    for case in ("download.pytorch.org/whl/cpu", "NVIDIA", "Apple", "conda env create"):
        assert case in text[:first_command], f"README names {case!r} only after the commands"


def test_console_script_points_at_a_main_function():
    target = _pyproject()["project"]["scripts"]["brrr"]
    module, func = target.split(":")
    assert module == "brrrlib.cli" and func == "main"
    import brrrlib.cli

    assert func in brrrlib.cli.__all__
    with pytest.raises(SystemExit) as done:  # argparse's --help: the parser is built, then exits
        getattr(brrrlib.cli, func)(["--help"])
    assert done.value.code == 0


def test_public_names_have_docstrings():
    """Every name in brrrlib.__all__ (and each module's own __all__) carries a docstring."""
    import importlib
    import inspect

    missing = []
    for mod_name in [
        "brrrlib",
        *[f"brrrlib.{m.stem}" for m in (ROOT / "brrrlib").glob("[!_]*.py")],
        *[f"brrrlib.{m.parent.name}" for m in (ROOT / "brrrlib").glob("[!_]*/__init__.py")],
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


def test_pre_commit_runs_ruff_and_strips_notebooks_with_stable_cell_ids():
    """The hooks: the ruff CI runs (the test extra's pin), nbstripout keeping cell ids."""
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    entries = [e.split() for e in re.findall(r"^ +entry: (.*)$", config, re.M)]
    assert ["ruff", "check"] in [e[:2] for e in entries]
    (strip,) = [e for e in entries if e[0] == "nbstripout"]
    assert "--keep-id" in strip and '"metadata.widgets"' in strip
    types = re.findall(r"^ +types: \[(.*)\]$", config, re.M)
    assert '"nbstripout==' in config and types == ["jupyter"]
    test_extra = _pyproject()["project"]["optional-dependencies"]["test"]
    ci_ruff = next(r for r in test_extra if _name(r) == "ruff").replace(" ", "")
    assert f'"{ci_ruff}"' in config, f"pre-commit's ruff differs from the test extra's {ci_ruff}"


def test_citation_names_this_version_and_repository():
    import brrrlib

    cff = dict(re.findall(r"^([\w-]+): (.*)$", (ROOT / "CITATION.cff").read_text(), re.M))
    assert cff["cff-version"] == "1.2.0" and cff["version"] == brrrlib.__version__
    source = _pyproject()["project"]["urls"]["Source"]
    assert cff["repository-code"] == f'"{source}"'


def test_readme_quotes_the_torch_range_record():
    """Every torch in .ci/torch_range.md is in README's table, passing or failing as recorded."""
    record = (ROOT / ".ci" / "torch_range.md").read_text()
    rows = re.findall(r"^\| (\d+\.\d+\.\d+) \| [^|]+ \| (pass|FAIL)", record, re.M)
    assert len(rows) >= 3, "the record has the floor, a middle torch and the newest"
    readme = (ROOT / "README.md").read_text()
    for version, result in rows:
        line = next((ln for ln in readme.splitlines() if ln.startswith(f"| {version}")), None)
        assert line is not None, f"README does not quote torch {version}"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1].startswith("pass") == (result == "pass"), line
