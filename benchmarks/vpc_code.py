"""One function of a VoicePrivacy toolkit file, taken alone (the benchmarks that compare vpeval
with the toolkits' own code: compare_vpc_mcadams.py, compare_vpc_pitch.py). The toolkits'
modules import their own packages and start work at import, so only the function is compiled,
with the names it uses."""
from __future__ import annotations

import ast
from pathlib import Path


def toolkit_function(path: Path, name: str, names: dict, expected: str):
    """The function `name` of the file `path`, compiled alone with `names` as its globals;
    `expected` says which toolkit file it should be, for the error when it is missing."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if not functions:
        raise SystemExit(f"{path}: no function {name} (is it {expected}?)")
    namespace = dict(names)
    exec(compile(ast.Module(body=functions, type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]
