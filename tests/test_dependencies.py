"""pyproject.toml names every distribution that lib imports, so `pip install .` alone runs it.

Each import in lib/ (read with ast, so nothing is imported) is mapped to the distribution
that provides it in this environment; the standard library and lib itself need nothing. An
import that lib guards (it runs without it) may sit in the optional `references` extra.
"""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pyproject.toml supports Python 3.10, where requirements.txt installs tomli (the same parser)
    import tomli as tomllib

ROOT = Path(__file__).parent.parent


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement such as 'scikit-learn>=1.4; ...'."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def lib_imports() -> dict[str, list[str]]:
    """Top-level module -> the lib files that import it (absolute imports only)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "lib").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], []).append(str(path.relative_to(ROOT)))
    return found


def test_every_import_of_lib_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    optional = {_name(r) for r in project.get("optional-dependencies", {}).get("references", [])}
    providers = packages_distributions()
    missing = []
    for module, files in sorted(lib_imports().items()):
        if module in sys.stdlib_module_names or module in {"lib", "__future__"}:
            continue
        assert module in providers, f"{module} (imported by {files[0]}) is not installed here"
        names = {_name(d) for d in providers[module]}
        if not names & (declared | optional):
            missing.append(f"{module} ({' or '.join(sorted(names))}), imported by {', '.join(sorted(set(files)))}")
    assert not missing, "pyproject.toml does not list: " + "; ".join(missing)


def test_the_optional_references_are_only_imports_that_lib_guards():
    # lib runs without an optional reference, so each one's import sits inside a try.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = {_name(r) for r in project["optional-dependencies"]["references"]}
    providers = packages_distributions()
    guarded, unguarded = set(), set()
    for path in sorted((ROOT / "lib").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        in_try = {id(node) for block in ast.walk(tree) if isinstance(block, ast.Try) for node in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module.split(".")[0]]
            else:
                continue
            for module in modules:
                for dist in providers.get(module, []):
                    (guarded if id(node) in in_try else unguarded).add(_name(dist))
    assert optional <= guarded, f"not imported by lib inside a try: {sorted(optional - guarded)}"
    assert not optional & unguarded, f"imported by lib without a guard: {sorted(optional & unguarded)}"


def _requirements(path: Path) -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def test_every_requirement_is_pinned_by_the_constraints_at_a_version_it_admits():
    """make venv installs requirements.txt under constraints.txt: each requirement that applies here has
    exactly one pin there (==), inside the requirement's own range, so the two cannot drift apart."""
    environment = default_environment()
    pins = {}
    for constraint in _requirements(ROOT / "constraints.txt"):
        assert [spec.operator for spec in constraint.specifier] == ["=="], f"not a pin: {constraint}"
        if constraint.marker is None or constraint.marker.evaluate(environment):
            assert _name(constraint.name) not in pins, f"pinned twice: {constraint.name}"
            pins[_name(constraint.name)] = next(iter(constraint.specifier)).version
    unpinned, outside = [], []
    for requirement in _requirements(ROOT / "requirements.txt"):
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        version = pins.get(_name(requirement.name))
        if version is None:
            unpinned.append(requirement.name)
        elif not requirement.specifier.contains(version, prereleases=True):
            outside.append(f"{requirement.name}=={version} is outside {requirement.specifier}")
    if sys.version_info >= (3, 11):  # the constraints apply from Python 3.11 (their markers say so)
        assert not unpinned, f"constraints.txt pins none of: {unpinned}"
    assert not outside, "; ".join(outside)


def test_nbformat_starts_without_building_an_iri_grammar():
    """Every graded notebook's worker and every grading command imports nbformat, which imports
    jsonschema's format checkers; from jsonschema 4.24 these import rfc3987-syntax (pulled in by
    jupyter-events' format-nongpl extra), which builds a grammar at import: 2 s per process. The
    pinned jsonschema does not ask for it, and the pins do not install it."""
    import subprocess
    from importlib.metadata import requires

    pins = {_name(c.name) for c in _requirements(ROOT / "constraints.txt")}
    assert "rfc3987-syntax" not in pins
    assert not [r for r in requires("jsonschema") or [] if _name(r) == "rfc3987-syntax"]
    code = "import sys, nbformat; print('rfc3987_syntax' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
