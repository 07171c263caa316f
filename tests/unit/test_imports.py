"""The package's import structure: no circle among module-level imports, and an import inside a
function only where it defers a heavy package (so that `tabrepro --help`, every Snakemake start and
the light commands stay quick), with a comment naming that package.

The structure is read from the sources with `ast`: a module's module-level imports (outside
`if TYPE_CHECKING:` and function bodies) are followed through the package to the third-party
packages they load."""

from __future__ import annotations

import ast
import graphlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Packages whose import costs a noticeable part of a second or more, or pulls a native runtime.
HEAVY = frozenset(
    {
        "catboost",
        "lightgbm",
        "matplotlib",
        "pandas",
        "pyarrow",
        "pytorch_tabnet",
        "rtdl_revisiting_models",
        "scipy",
        "sklearn",
        "statsmodels",
        "torch",
        "xgboost",
    }
)


@dataclass(frozen=True)
class InnerImport:
    module: str
    line: int
    targets: tuple[str, ...]
    optional: bool  # inside `try:` with an `except ImportError` (an optional dependency)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class Package:
    """Module-level and function-level imports of every module under a source root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = {_module_name(path, root): path for path in sorted(root.rglob("*.py"))}
        self.trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in self.paths.items()}
        self.top = {name: self._top_level(name, tree.body) for name, tree in self.trees.items()}
        self._heavy: dict[str, frozenset[str]] = {}

    def _base(self, node: ast.ImportFrom, module: str) -> str:
        if node.level == 0:
            return node.module or ""
        package = module.split(".")
        if self.paths[module].name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))

    def targets(self, node: ast.Import | ast.ImportFrom, module: str) -> tuple[str, ...]:
        """The modules an import statement loads (a `from package import submodule` names the submodule)."""
        if isinstance(node, ast.Import):
            return tuple(alias.name for alias in node.names)
        base = self._base(node, module)
        return tuple(f"{base}.{a.name}" if f"{base}.{a.name}" in self.paths else base for a in node.names)

    def _top_level(self, module: str, body: list[ast.stmt]) -> set[str]:
        found: set[str] = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and _is_type_checking(node):
                found |= self._top_level(module, node.orelse)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(self.targets(node, module))
                continue
            for block in ("body", "orelse", "finalbody"):
                found |= self._top_level(module, getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                found |= self._top_level(module, handler.body)
        return found

    def heavy(self, module: str) -> frozenset[str]:
        """The heavy packages that importing `module` loads through module-level imports."""
        root = module.split(".")[0]
        if root != self.root_package:
            return frozenset({root} & HEAVY)
        if module in self._heavy:
            return self._heavy[module]
        self._heavy[module] = frozenset()  # a circle adds nothing (and is reported by its own test)
        parts = module.split(".")
        loaded: set[str] = set()
        for depth in range(1, len(parts)):  # importing a.b.c runs a and a.b first
            loaded |= self.heavy(".".join(parts[:depth]))
        for dependency in self.top.get(module, ()):
            loaded |= self.heavy(dependency)
        self._heavy[module] = frozenset(loaded)
        return self._heavy[module]

    @property
    def root_package(self) -> str:
        return next(iter(self.paths)).split(".")[0]

    def inner_imports(self) -> list[InnerImport]:
        found = []
        for module, tree in self.trees.items():
            for function in ast.walk(tree):
                if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found += self._imports_in(module, function.body, optional=False)
        return sorted(set(found), key=lambda i: (i.module, i.line))

    def _imports_in(self, module: str, body: list[ast.stmt], optional: bool) -> list[InnerImport]:
        found = []
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(InnerImport(module, node.lineno, self.targets(node, module), optional))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # walked on its own
            elif isinstance(node, ast.Try):
                guarded = optional or any(_catches_import_error(h) for h in node.handlers)
                found += self._imports_in(module, node.body, guarded)
                for block in (node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    found += self._imports_in(module, block, optional)
            else:
                for block in ("body", "orelse", "finalbody"):
                    found += self._imports_in(module, getattr(node, block, []), optional)
        return found

    def comment_near(self, item: InnerImport) -> str:
        """The comment on an import's first line and on the line above it."""
        lines = self.paths[item.module].read_text(encoding="utf-8").splitlines()
        nearby = lines[max(item.line - 2, 0) : item.line]
        return " ".join(line.partition("#")[2] for line in nearby if "#" in line)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def deferral_problems(package: Package) -> list[str]:
    """One line per import inside a function that defers nothing heavy, or does not say what it defers."""
    problems = []
    for item in package.inner_imports():
        if item.optional:
            continue
        deferred = set().union(*(package.heavy(t) for t in item.targets)) - package.heavy(item.module)
        where = f"{package.paths[item.module].relative_to(package.root)}:{item.line}"
        if not deferred:
            problems.append(
                f"{where}: imports {', '.join(sorted(set(item.targets)))} inside a function, "
                "which loads nothing heavy the module does not load already: import it at the top"
            )
        elif not any(re.search(rf"\b{name}\b", package.comment_near(item)) for name in deferred):
            problems.append(f"{where}: a deferred import without a comment naming what it defers ({sorted(deferred)})")
    return problems


def import_circles(package: Package) -> list[str]:
    """The module-level import graph's circle, if any (graphlib names one)."""
    graph = {m: {d for d in deps if d in package.paths and d != m} for m, deps in package.top.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        return [" -> ".join(error.args[1])]
    return []


@pytest.fixture(scope="module")
def package() -> Package:
    return Package(SRC)


def test_no_circle_among_module_level_imports(package):
    assert import_circles(package) == []


def test_imports_inside_functions_only_defer_heavy_packages_and_say_so(package):
    assert deferral_problems(package) == []


def test_the_package_is_read(package):
    """Guards the two tests above against reading nothing: the package's known deferrals are seen."""
    seen = {(i.module, t) for i in package.inner_imports() for t in i.targets}
    assert ("tabrepro.models.xgboost_model", "xgboost") in seen
    assert package.heavy("tabrepro.models.torch_model") == frozenset()
    assert "torch" in package.heavy("tabrepro.models.npt.estimator")


def _write_package(root: Path, files: dict[str, str]) -> Package:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Package(root)


def test_a_light_import_inside_a_function_is_refused(tmp_path):
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "light.py": "import json\n",
            "user.py": "def f():\n    from pkg import light\n    import json\n",
        },
    )
    problems = deferral_problems(package)
    assert len(problems) == 2 and all("import it at the top" in p for p in problems)


def test_a_deferred_import_needs_its_comment_and_an_optional_one_is_let_be(tmp_path):
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "net.py": "import torch\n",
            "said.py": "def f():\n    from pkg import net  # deferred: loads torch\n",
            "above.py": "def f():\n    # deferred: loads torch\n    from pkg.net import (\n        x,\n    )\n",
            "silent.py": "def f():\n    from pkg import net\n",
            "wrong.py": "def f():\n    import scipy  # deferred: loads torch\n",
            "optional.py": "def f():\n    try:\n        import json\n    except ImportError:\n        pass\n",
        },
    )
    problems = deferral_problems(package)
    assert [p.split(":")[0] for p in problems] == ["pkg/silent.py", "pkg/wrong.py"]


def test_a_deferral_that_the_module_already_pays_for_is_refused(tmp_path):
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "net.py": "import torch\n",
            "user.py": "import torch\n\ndef f():\n    from pkg import net  # deferred: loads torch\n",
        },
    )
    assert [p.split(":")[0] for p in deferral_problems(package)] == ["pkg/user.py"]


def test_a_circle_is_named(tmp_path):
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "import pkg.a\n",
            "c.py": "def f():\n    import pkg.a\n",
        },
    )
    assert len(import_circles(package)) == 1 and "pkg.a" in import_circles(package)[0]
