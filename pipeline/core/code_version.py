"""The version of the code behind a stage's output: a digest of the source it runs.

A cache key that covers only settings and inputs serves stale results after an upgrade that
changes how a stage computes (the VoicePrivacy toolkits' fault). `code_digest(modules)` is
a hash of every project module (`pipeline.*`, `anonymizers.*`) the named modules import,
directly or through others, read statically from their source: the stage module itself,
and the plugin classes its settings name (`_target_`, a front-end class path), which the
stage instantiates by name. A module's source counts as parsed and with docstrings removed,
so a comment, a docstring or a reformatting changes no digest, and any change to code does.

An import names a module, or names from a package (`from pipeline.metrics import eer`);
such a name counts as the submodule it is, or as the submodule the package's `__init__`
imports it from, so a stage depends on the metrics it uses, not on every metric of the
package. Over-approximation is safe (a result computed again), under-approximation is not:
every import inside a function counts too.

>>> len(code_digest(["pipeline.stages.evaluate"]))
16
>>> code_digest(["pipeline.stages.evaluate"]) == code_digest(["pipeline.stages.evaluate"])
True
"""
from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

PACKAGES = ("pipeline", "anonymizers")
ROOT = Path(__file__).resolve().parents[2]  # the folder holding the packages (a clone or site-packages)


def code_digest(modules: Iterable[str], root: Path = ROOT) -> str:
    """Digest of the source of `modules` and every project module they import."""
    return _digest(tuple(sorted(set(modules))), Path(root))


@lru_cache(maxsize=None)
def _digest(modules: tuple[str, ...], root: Path) -> str:  # a cache call per stage call: once per process
    closure = sorted(set().union(*(_closure(m, root) for m in modules)))
    text = "\n".join(f"{name} {_module_digest(name, root)}" for name in closure)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plugin_modules(settings) -> set[str]:
    """The project modules named by class or function paths in `settings` (a `_target_`,
    `attacker.model.frontend`): the code a stage instantiates by name."""
    found: set[str] = set()
    if isinstance(settings, dict):
        for value in settings.values():
            found |= plugin_modules(value)
    elif isinstance(settings, (list, tuple)):
        for value in settings:
            found |= plugin_modules(value)
    elif isinstance(settings, str) and settings.split(".", 1)[0] in PACKAGES:
        parts = settings.split(".")
        for end in range(len(parts), 1, -1):  # the longest prefix that is a module (below the package)
            if _file(".".join(parts[:end]), ROOT) is not None:
                found.add(".".join(parts[:end]))
                break
    return found


def _file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _parse(module: str, root: Path) -> ast.Module | None:
    path = _file(module, root)
    return None if path is None else ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


_tree = lru_cache(maxsize=None)(_parse)  # read-only uses; `_module_digest` edits its own parse


@lru_cache(maxsize=None)
def _module_digest(module: str, root: Path) -> str:
    tree = _parse(module, root)
    if tree is None:
        return "absent"
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def _closure(module: str, root: Path) -> frozenset[str]:
    found, pending = set(), [module]
    while pending:
        name = pending.pop()
        if name in found or _file(name, root) is None:
            continue
        found.add(name)
        pending += _imports(name, root)
    return frozenset(found)


@lru_cache(maxsize=None)
def _imports(module: str, root: Path) -> tuple[str, ...]:
    """The project modules `module` imports (names from a package resolved to submodules)."""
    tree = _tree(module, root)
    is_package = _file(module, root).name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if source.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                found.append(_defining_module(source, alias.name, root))
    return tuple(found)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _defining_module(package: str, name: str, root: Path) -> str:
    """The module that `from package import name` depends on: the submodule `name`, the
    module the package's `__init__` takes `name` from, or the package itself."""
    if _file(f"{package}.{name}", root) is not None:
        return f"{package}.{name}"
    tree = _tree(package, root)
    if tree is not None and _file(package, root).name == "__init__.py":
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                source = _absolute(node, package, True)
                path = _file(source, root) if source.split(".")[0] in PACKAGES else None
                if path is not None:
                    return _defining_module(source, name, root) if path.name == "__init__.py" else source
    return package
