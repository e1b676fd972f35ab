"""The grader's layout is its architecture: core <- analysis <- runs <- judge <- commands. A module imports only
its own layer and the layers below, with no import circle, and only the children in grader/runs/ import a
step file (core/build.kernel_factory)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

LAYERS = ("core", "analysis", "runs", "judge", "commands")
# the one module outside runs/ that imports step files: `make bench` times the reference solutions, not a student's
REFERENCE_ONLY = {"grader.commands.bench"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((REPO / "grader").rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules `path` imports, at any depth of its code (a function's own imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("grader."):
                found.add(target)
    return found


def _layer(module: str) -> int:
    """core 0 ... commands 4; grader/__main__ (the grade's entry) above them all."""
    part = module.split(".")[1]
    return LAYERS.index(part) if part in LAYERS else len(LAYERS)


def test_every_module_is_in_a_layer():
    loose = [name for name in _modules() if name.count(".") == 1 and name.split(".")[1] not in (*LAYERS, "__main__")]
    assert loose == []


def test_no_module_imports_a_layer_above_its_own():
    modules = _modules()
    upward = [(name, target) for name, path in modules.items() for target in _imports(path, modules)
              if _layer(target) > _layer(name)]
    assert upward == []


def test_the_grader_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, f"import circle: {' -> '.join(path[path.index(name):] + [name])}"
        if name in done:
            return
        for target in sorted(graph[name]):
            if not (modules[name].name == "__init__.py" and target.startswith(name + ".")):
                visit(target, path + [name])
        done.add(name)

    for name in graph:
        visit(name, [])


def test_only_the_children_import_a_step_file():
    callers = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Attribute, ast.Name)) and "kernel_factory" in (getattr(node, "attr", None),
                                                                                  getattr(node, "id", None)):
                callers.add(name)
    assert callers - REFERENCE_ONLY == {"grader.runs.build_child", "grader.runs.debug_child",
                                        "grader.runs.timeline_child"}
