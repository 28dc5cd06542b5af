"""No import circle among Parley's modules, a package's insides included.

The layers contract (pyproject.toml's [tool.importlinter]) places a package as one layer, so it cannot see a circle
among the modules inside one; this looks at every module, a package's __init__.py included. grimp (import-linter's
graph builder) reads the imports, all of them: one under TYPE_CHECKING is followed by mypy and the reader, and one
inside a function only puts the circle off until it is called.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_no_import_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parley's modules import one another in one direction only: the circles found are listed, and none is."""
    circles = import_circles(ROOT, tmp_path, monkeypatch)
    assert circles == []


def test_a_circle_inside_a_package_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two modules of one package that import each other, one of them under TYPE_CHECKING, are a circle."""
    project, view = tmp_path / "project", tmp_path / "view"
    (project / "house").mkdir(parents=True)
    view.mkdir()
    (project / "pyproject.toml").write_text('[tool.importlinter]\nroot_packages = ["house", "door"]\n')
    (project / "door.py").write_text("import house\n")
    (project / "house" / "__init__.py").write_text("")
    (project / "house" / "hall.py").write_text("from house.room import Room\n")
    (project / "house" / "room.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from house.hall import Hall\n"
    )
    assert import_circles(project, view, monkeypatch) == [["house.hall", "house.room"]]


def import_circles(root: Path, view: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each set of `root`'s modules that import one another round, as its sorted names."""
    graph = import_graph(root, view, monkeypatch)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    return sorted(circle for circle in strongly_connected(imports) if len(circle) > 1)


def import_graph(root: Path, view: Path, monkeypatch: pytest.MonkeyPatch) -> grimp.ImportGraph:
    """The import graph of `root`'s modules and packages (pyproject.toml's [tool.importlinter] root_packages).

    grimp takes only packages as roots: each root module is shown to it as a package of one module under its own
    name, in `view`, as .ci/lint-imports does. It looks each up as an import would: a module imported already (by
    another test) would be found where it was, so each is out of sys.modules while the graph is built.
    """
    names = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
        if (root / name / "__init__.py").is_file():
            (view / name).symlink_to(root / name, target_is_directory=True)
        else:
            (view / name).mkdir()
            (view / name / "__init__.py").symlink_to(root / f"{name}.py")
    monkeypatch.syspath_prepend(str(view))
    return grimp.build_graph(*names, cache_dir=None)


def strongly_connected(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of the graph `imports` (Tarjan's algorithm), each sorted."""
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = lowest[module] = len(order)
        stack.append(module)
        for imported in imports.get(module, ()):
            if imported not in order:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            components.append(sorted(component))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return components
