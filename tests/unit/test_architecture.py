"""The package's shape: no import circles, and the layers import downwards only.

User API (embedding, checkpoint, optim) -> storage -> distributed. The import graph is read
from the source with ``ast`` (every import statement, also those inside functions and under
``TYPE_CHECKING``; relative imports resolved), not from what happens to be imported at run
time, so an import hidden in a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import graphemb

PACKAGE_ROOT = Path(graphemb.__file__).parent


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(
    root: Path = PACKAGE_ROOT, unresolved: list[str] | None = None
) -> dict[str, set[str]]:
    """Module -> graphemb modules it imports (resolved names of modules that exist).

    Imports of graphemb modules that do not exist are appended to ``unresolved``.
    """
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    # The package the dots count from: a package's own __init__ is level 1.
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # ``from package import name``: the submodule ``name`` if there is one, else
                # the package (which defines ``name``).
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in files else source
                    for alias in node.names
                ]
            for target in targets:
                if unresolved is not None and inside(target, root.name) and target not in files:
                    unresolved.append(f"{name}: {target}")
                # The longest prefix that is one of our modules (``graphemb.x.y`` where y is
                # a function of graphemb.x counts as graphemb.x).
                parts = target.split(".")
                while parts and ".".join(parts) not in files:
                    parts.pop()
                if parts and ".".join(parts) != name:
                    graph[name].add(".".join(parts))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a closed
    path of module names through the component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [closed_path(graph, set(c)) for c in components]


def closed_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of a component (breadth-first)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return sorted(component)


def test_the_graph_reader_sees_imports_in_functions_and_relative_imports(tmp_path):
    """The checker itself: a circle hidden in a function import is found."""
    pkg = tmp_path / "graphemb"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from .sub.b import g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nimport graphemb.sub\n")
    (pkg / "sub" / "c.py").write_text("from ..gone import h\n")
    unresolved: list[str] = []
    graph = import_graph(pkg, unresolved)
    assert unresolved == ["graphemb.sub.c: graphemb.gone"]
    assert graph == {
        "graphemb": {"graphemb.a"},
        "graphemb.a": {"graphemb.sub.b"},
        "graphemb.sub": set(),
        "graphemb.sub.b": {"graphemb.a", "graphemb.sub"},
        "graphemb.sub.c": {"graphemb"},
    }
    assert cycles(graph) == [["graphemb.a", "graphemb.sub.b", "graphemb.a"]]


def test_every_import_of_the_package_names_one_of_its_modules():
    """A moved module leaves no import of its old path behind (an editable install of
    another checkout would otherwise serve the stale module silently)."""
    unresolved: list[str] = []
    import_graph(unresolved=unresolved)
    assert unresolved == [], f"imports of modules that do not exist: {unresolved}"


def test_no_import_cycles():
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


# (lower layer, what it must not import)
LAYERS = [
    ("graphemb.distributed", ["graphemb.storage", "graphemb.checkpoint", "graphemb.embedding"]),
    ("graphemb.distributed", ["graphemb.optim"]),
    ("graphemb.storage", ["graphemb.checkpoint", "graphemb.embedding", "graphemb.optim"]),
    ("graphemb.sampling", ["graphemb.skipgram"]),
    # Inside skip-gram: what a run is (options, rate, guard, windows), then its corpus,
    # then the backends, then the run loop.
    (
        "graphemb.skipgram.options",
        ["graphemb.skipgram.corpus", "graphemb.skipgram.backends", "graphemb.skipgram.run"],
    ),
    ("graphemb.skipgram.windows", ["graphemb.skipgram.backends", "graphemb.skipgram.run"]),
    ("graphemb.skipgram.rate", ["graphemb.skipgram.backends", "graphemb.skipgram.run"]),
    ("graphemb.skipgram.guard", ["graphemb.skipgram.backends", "graphemb.skipgram.run"]),
    ("graphemb.skipgram.corpus", ["graphemb.skipgram.backends", "graphemb.skipgram.run"]),
    ("graphemb.skipgram.backends", ["graphemb.skipgram.run"]),
    # The compiled kernels' bindings are the bottom: torch and the library, nothing of ours.
    (
        "graphemb._native",
        [
            "graphemb.optim",
            "graphemb.storage",
            "graphemb.distributed",
            "graphemb.sampling",
            "graphemb.skipgram",
            "graphemb.nn",
            "graphemb.io",
            "graphemb.graph",
            "graphemb.embedding",
            "graphemb.checkpoint",
            "graphemb._compiled",
            "graphemb.about",
        ],
    ),  # fmt: skip
]


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize(("layer", "higher"), LAYERS)
def test_lower_layers_never_import_higher_ones(layer, higher):
    graph = import_graph()
    assert any(inside(m, layer) for m in graph), f"no modules in {layer}"
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if inside(module, layer)
        for target in targets
        if any(inside(target, h) for h in higher)
    )
    assert wrong == [], f"{layer} must not import {higher}: {wrong}"
