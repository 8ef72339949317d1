"""docs/architecture.md states the layers and their import directions; the code must obey them.

Every import of an ``otel_scorers`` module anywhere in the package (module level or inside a
function) is checked against the table, plus the page's extra rules.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "otel_scorers"
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]
    may_import: tuple[str, ...]


def layers() -> list[Layer]:
    section = PAGE.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    out = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        modules = tuple(re.findall(r"`([\w.]+)`", cells[1]))
        may = ("*",) if cells[2] == "`*`" else tuple(re.findall(r"`([\w.]+)`", cells[2]))
        out.append(Layer(cells[0], modules, may))
    return out


LAYERS = layers()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def layer_of(module: str) -> Layer:
    """The layer whose listed module is the longest prefix of ``module``."""
    best: tuple[int, Layer] | None = None
    for layer in LAYERS:
        for listed in layer.modules:
            matches = module == listed or module.startswith(listed + ".")
            if matches and (best is None or len(listed) > best[0]):
                best = (len(listed), layer)
    if best is None:
        raise AssertionError(f"otel_scorers.{module} is in no layer of docs/architecture.md")
    return best[1]


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import in ``path``, relative names resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            out.append((node.module, node.lineno))
            # "from otel_scorers.emit import spans" imports the module otel_scorers.emit.spans
            out.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names
                       if (PACKAGE / Path(*node.module.split(".")[1:]) / alias.name).exists()
                       or (PACKAGE / Path(*node.module.split(".")[1:])
                           / f"{alias.name}.py").exists())
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_the_page_lists_layers() -> None:
    assert {layer.name for layer in LAYERS} >= {"leaves", "judge", "scorers", "capture", "emit",
                                                 "pipeline", "entry points"}


@pytest.mark.parametrize("path", SOURCES, ids=module_name)
def test_imports_follow_the_layers(path: Path) -> None:
    own = layer_of(module_name(path))
    leaves = next(layer for layer in LAYERS if layer.name == "leaves")
    for target, line in imports(path):
        if not target.startswith("otel_scorers.") or own.may_import == ("*",):
            continue
        other = layer_of(target.removeprefix("otel_scorers."))
        allowed = (other in (own, leaves)
                   or any(m in own.may_import for m in other.modules))
        assert allowed, (f"{path.relative_to(ROOT)}:{line} imports {target} "
                         f"({own.name} -> {other.name}), which docs/architecture.md forbids")


def test_only_pipeline_build_reads_config_or_builds_judges() -> None:
    # the settings models are values any part may hold (a session policy); reading settings
    # (files, the environment, the table) and making judges is build's alone
    for path in (PACKAGE / "pipeline").rglob("*.py"):
        if path.name == "build.py":
            continue
        for target, line in imports(path):
            if target == "otel_scorers.config.settings":
                continue
            assert not target.startswith(("otel_scorers.config", "otel_scorers.judge")), (
                f"{path.relative_to(ROOT)}:{line} imports {target}: only pipeline/build.py may")


def test_nothing_imports_the_cli() -> None:
    for path in SOURCES:
        if module_name(path).startswith(("cli", "__main__")):
            continue
        for target, line in imports(path):
            assert not target.startswith("otel_scorers.cli"), f"{path}:{line} imports the CLI"


def test_scorers_and_judge_know_no_spans() -> None:
    for path in SOURCES:
        if not module_name(path).startswith(("scorers", "judge")):
            continue
        for target, line in imports(path):
            if target.startswith("opentelemetry"):
                assert target == "opentelemetry" or target.startswith("opentelemetry.context"), (
                    f"{path.relative_to(ROOT)}:{line} imports {target}")


def test_a_violation_is_caught() -> None:
    # The check can fail: a pipeline module importing config directly is reported.
    own = layer_of("pipeline.processor")
    assert own.name == "pipeline"
    assert layer_of("capture.trace").name == "capture"
    capture = layer_of("capture")
    assert not any(m in capture.may_import for m in layer_of("pipeline").modules)


def import_graph() -> dict[str, set[str]]:
    """Module -> the library's modules it imports (any import, typing-only ones too); an
    import of a package's submodule (``from otel_scorers import names``) is not an import of
    the package itself."""
    known = {module_name(path) for path in SOURCES}
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        edges = set()
        for target, _ in imports(path):
            name = target.removeprefix("otel_scorers.")
            if target.startswith("otel_scorers.") and name in known:
                edges.add(name)
        graph[module_name(path)] = edges
    for source, edges in graph.items():  # "from otel_scorers.x import y" names x and x.y
        for target in list(edges):
            if any(other.startswith(target + ".") for other in edges) and target != source:
                edges.discard(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_round_about() -> None:
    # An import cycle makes the import order matter and the modules one: each floor's modules
    # import downwards only, typing-only imports included.
    assert cycles(import_graph()) == []


def test_a_cycle_is_caught() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_modules_stay_small() -> None:
    """No module over 400 lines; the processor and the evaluation (the two files every feature
    used to go through) at most 250: a new capability is a new module and a registry row."""
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
             for path in SOURCES}
    assert {name: size for name, size in sizes.items() if size > 400} == {}
    assert sizes["pipeline/processor.py"] <= 250 and sizes["pipeline/evaluation.py"] <= 250
