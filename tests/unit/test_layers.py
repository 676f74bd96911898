"""The runner's imports follow its stages: no import cycle anywhere in runner/kit, and no
arrow from a stage to one after it (the Layout table, docs/development.md and the README
before it: each package imports only those above it in the table).

Every import counts, wherever it is written: at a module's top, in a function (a lazy
import) or for the type checker alone. Each is an arrow a reader follows, and a lazy import
that closes a cycle is a cycle all the same.
"""

import ast
from pathlib import Path

KIT = Path(__file__).parents[2] / "runner" / "kit"

# The stages, lowest first; a module may import its own stage's and any lower one's. The
# Layout table in its order: results/ reads launch/ (the host's load, the --hosts
# launcher's label), analysis/ reads results/ (one campaign's records), across/ reads both
# (campaigns compared), run/ reads them all (what a campaign writes, stops on and files);
# report/ reads them (a preset's folder too: its preset.json); doctor and cli sit on top.
# "kit" is the package's own __init__ (its version).
STAGES = {
    "kit": 0,
    "core": 0,
    "image": 1,
    "runtimes": 2,
    "launch": 3,
    "results": 4,
    "analysis": 5,
    "across": 6,
    "run": 7,
    "report": 8,
    "doctor": 9,
    "cli": 10,
}

# Imports that issue #47 has still to remove (in modules being reshaped as it is written),
# each allowed here by name until then; a test fails once one is gone, so these only shrink.
# Against the order: none left.
ISSUE_47_UPWARD: set[tuple[str, str]] = set()
# Closing a cycle: none left.
ISSUE_47_CYCLE: set[tuple[str, str]] = set()


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at root, by its dotted name (a package by its own)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: Path) -> dict[str, set[str]]:
    """Each module's imports of the package's modules, at any depth: `from a import b` is
    an arrow to module a.b when there is one, else to a (whose __init__ holds b)."""
    known = modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, level - 1 folders up
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        ours = {t for t in targets if t == root.name or t.startswith(root.name + ".")}
        unknown = ours - known.keys()
        assert not unknown, f"{name} imports {sorted(unknown)}, which {root} does not hold"
        graph[name] = ours
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that import each other (Tarjan's strongly
    connected components), as the path a reader would walk: a -> b -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while (w := stack.pop()) != v:
                group.add(w)
            groups.append(group | {v})

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in groups:
        if len(group) == 1 and not graph[next(iter(group))] & group:
            continue  # a module alone, importing neither itself nor a module it is imported by
        start = min(group)
        paths = {start: [start]}
        todo = [start]
        while todo:  # breadth first, within the group, back to start
            v = todo.pop(0)
            for w in sorted(graph[v] & group):
                if w == start:
                    found.append([*paths[v], start])
                    todo = []
                    break
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    todo.append(w)
    return found


def stage(module: str) -> str:
    """kit.launch.hosts -> launch; kit.cli -> cli; kit -> kit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports (importer, imported) of a stage after the importer's."""
    return {(a, b) for a in graph for b in graph[a] if STAGES[stage(a)] < STAGES[stage(b)]}


def test_every_stage_has_its_place():
    """A new package or top-level module is placed in STAGES before anything imports it."""
    assert {stage(m) for m in modules(KIT)} <= STAGES.keys()


def test_no_import_cycle():
    graph = imports(KIT)
    gone = {(a, b) for a, b in ISSUE_47_CYCLE if b not in graph.get(a, set())}
    assert not gone, f"no longer imported: take {sorted(gone)} out of ISSUE_47_CYCLE"
    found = cycles({a: {b for b in bs if (a, b) not in ISSUE_47_CYCLE} for a, bs in graph.items()})
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_import_against_the_stage_order():
    found = upward(imports(KIT))
    new = sorted(found - ISSUE_47_UPWARD)
    assert not new, "imports of a later stage:\n" + "\n".join(
        f"{a} -> {b} ({stage(a)} imports {stage(b)})" for a, b in new
    )
    gone = ISSUE_47_UPWARD - found
    assert not gone, f"no longer imported: take {sorted(gone)} out of ISSUE_47_UPWARD"


def test_the_walk_sees_lazy_imports_and_a_cycle_through_them(tmp_path):
    """A function's import and a type checker's import are arrows too; a cycle through one
    of them is found and named, as is an import of a later stage."""
    kit = tmp_path / "kit"
    for folder in (kit, kit / "core", kit / "run"):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (kit / "core" / "units.py").write_text("def f():\n    from kit.run import plan\n")
    (kit / "run" / "plan.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..core.units import f\n"
        "from kit.run import progress\n"
    )
    (kit / "run" / "progress.py").write_text("import kit.core.units\n")
    graph = imports(kit)
    assert graph["kit.core.units"] == {"kit.run.plan"}
    assert graph["kit.run.plan"] == {"kit.core.units", "kit.run.progress"}
    assert sorted(map(tuple, cycles(graph))) == [
        ("kit.core.units", "kit.run.plan", "kit.core.units")
    ]
    assert upward(graph) == {("kit.core.units", "kit.run.plan")}
