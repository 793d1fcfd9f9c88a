"""The import rules of architecture.md as a checker the tests run on the tree (and on planted faults).

* Packages form layers (``rolecast`` < ``memory`` < ``actions`` < ``roles`` < ``environment``):
  a module may import only its own layer or lower ones.
* Modules form no import cycle, counting every import executed at module level
  (``if TYPE_CHECKING:`` blocks are not executed and do not count).
* No framework module is imported inside a function: a function-level import is how a
  cycle hides. Lazy imports of optional third-party packages (openai, llama_cpp …) are fine.
* A package may export names lazily (:func:`rolecast.core.lazy.lazy_exports`): it names them in its
  ``if TYPE_CHECKING:`` imports, and ``from package import Name`` then counts as an import of
  the submodule that defines ``Name``, where the importer runs it, so laziness hides no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (resolved for relative imports)
    module_level: bool
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, module_level: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            continue
        inner = module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield child, inner
        yield from _walk(child, inner)


def lazy_names(root: Path, package: str) -> dict[str, str]:
    """Names ``package`` exports lazily → the submodule that defines each (its TYPE_CHECKING imports)."""
    init = root / package.replace(".", "/") / "__init__.py"
    if not init.exists():
        return {}
    names: dict[str, str] = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.level == 1:
                    for alias in inner.names:
                        names[alias.asname or alias.name] = f"{package}.{inner.module}"
    return names


def imports_of(root: Path, path: Path, packages: set[str]) -> list[Import]:
    """The framework imports of one file (relative ones resolved), with where they run."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node, module_level in _walk(ast.parse(path.read_text(encoding="utf-8")), True):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            targets = [module]
            # ``from pkg import submodule`` imports the submodule too
            targets += [f"{module}.{a.name}" for a in node.names if (root / module.replace(".", "/") / a.name).exists()
                        or (root / (module.replace(".", "/") + f"/{a.name}.py")).exists()]
            lazy = lazy_names(root, module) if module.split(".")[0] in packages else {}
            targets += [lazy[a.name] for a in node.names if a.name in lazy]
        for target in targets:
            if target.split(".")[0] in packages:
                found.append(Import(name, target, module_level, getattr(node, "lineno", 0)))
    return found


def all_imports(root: Path, packages: list[str]) -> list[Import]:
    out: list[Import] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            out.extend(imports_of(root, path, set(packages)))
    return out


def upward_imports(root: Path, layers: dict[str, int]) -> list[str]:
    return [
        f"{i.source} imports {i.target} (line {i.line})"
        for i in all_imports(root, list(layers))
        if layers[i.target.split(".")[0]] > layers[i.source.split(".")[0]]
    ]


def function_level_imports(root: Path, packages: list[str]) -> list[str]:
    return [f"{i.source} imports {i.target} inside a function (line {i.line})"
            for i in all_imports(root, packages) if not i.module_level]


def module_cycles(root: Path, packages: list[str]) -> list[list[str]]:
    """Import cycles between modules, counting module-level imports (a package's
    ``__init__`` runs when any module inside it is imported)."""
    import networkx as nx

    modules = {module_name(root, p) for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for imp in all_imports(root, packages):
        if not imp.module_level:
            continue
        target = imp.target
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]  # ``from pkg.mod import name`` → pkg.mod
        if target in modules and target != imp.source:
            graph.add_edge(imp.source, target)
            # importing a.b.c runs a and a.b first
            parts = target.split(".")
            for k in range(1, len(parts)):
                parent = ".".join(parts[:k])
                if parent in modules and parent != imp.source and not imp.source.startswith(parent + "."):
                    graph.add_edge(imp.source, parent)
    return [sorted(c) for c in nx.simple_cycles(graph)]


#: the size rule of architecture.md: a module under 600 lines, a function under 80
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def oversized(root: Path, packages: list[str], *, max_module: int = MAX_MODULE_LINES,
              max_function: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Modules of ``max_module`` lines or more and functions of ``max_function`` lines or more (from
    ``def`` to their last line, decorators not counted): ``path`` or ``path::Class.function`` → lines."""
    found: dict[str, int] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            rel = path.relative_to(root).as_posix()
            lines = len(text.splitlines())
            if lines >= max_module:
                found[rel] = lines
            for qualname, node in _functions(ast.parse(text)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length >= max_function:
                    found[f"{rel}::{qualname}"] = length
    return found


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
