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

import pytest

tomllib = pytest.importorskip("tomllib")  # the standard library from Python 3.11

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
