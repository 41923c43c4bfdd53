"""The layout's rules, checked on the source: no import cycle between the package's
modules (every import counts: at module level, inside a function, for type checkers
only), no module over 400 lines, no class over 300 lines."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "prefork"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 300


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name, path, known):
    """The package's modules that `name` imports anywhere in its source. An import
    inside a function, or for type checkers only, is a dependency all the same: a
    cycle of them is two modules that cannot be understood, or changed, apart."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    edges = set()
    for target in found:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.add(target)
    return edges


def find_cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return trail[trail.index(target):] + [target]
            if target not in state:
                cycle = visit(target, trail + [target])
                if cycle:
                    return cycle
        state[node] = "closed"
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            if cycle:
                return cycle
    return None


def import_graph():
    known = modules()
    graph = {}
    for name, path in known.items():
        # A module importing its own package's __init__ is not a cycle of ours to
        # count: Python imports the package first anyway.
        graph[name] = {target for target in imported_modules(name, path, known)
                       if not name.startswith(target + ".")}
    return graph


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_imports_inside_functions_and_for_type_checkers_count(tmp_path):
    (tmp_path / "a.py").write_text("def later():\n    from .b import thing\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n\n"
                                   "if TYPE_CHECKING:\n    from . import a\n")
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    graph = {name: imported_modules(name, path, known) for name, path in known.items()}
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_no_import_cycle_between_the_packages_modules():
    graph = import_graph()
    assert "prefork.supervisor.loop" in graph and graph["prefork.supervisor.loop"], \
        "the import graph was not read"
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_no_module_over_400_lines():
    long = {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in modules().items()}
    assert {name: lines for name, lines in long.items() if lines > MAX_MODULE_LINES} == {}


def test_no_class_over_300_lines():
    long = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    assert long == {}


def test_every_folder_of_code_is_a_package():
    """setup.cfg's `packages = find:` ships only folders with an __init__.py: a folder of
    modules without one would be missing from an installed wheel."""
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    assert sorted(str(folder.relative_to(PACKAGE)) for folder in folders
                  if not (folder / "__init__.py").exists()) == []
