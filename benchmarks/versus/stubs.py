"""Stand-in modules for the authors' imports that a training step never uses.

The authors' repositories import experiment tracking (wandb), other training stacks (fairseq,
transformers), data download helpers and plotting at module level. None of it runs in a training
step, and installing it would take minutes and network access, so the driver process installs
an import hook that answers those names with empty modules. Any attribute of a stub module is a
class that refuses to be instantiated or called: if a step ever did use one, the benchmark fails
loudly instead of timing something else.

Used only inside the authors' driver process (benchmarks.versus.driver), never in ours.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["StubbedUse", "install_stubs", "missing"]


class StubbedUse(RuntimeError):
    """The authors' code used something the harness replaced with a stub."""


class _StubModule(types.ModuleType):
    """A package whose every attribute is a refusing placeholder class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # keeps introspection (copy, pickle, inspect) honest
        placeholder = _placeholder(f"{self.__name__}.{name}")
        setattr(self, name, placeholder)
        return placeholder


def _placeholder(qualified: str) -> type:
    """A class named after `qualified` that can be imported and subclassed, but not used."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StubbedUse(f"{qualified} is stubbed by benchmarks.versus (the timed step must not use it)")

    module, _, name = qualified.rpartition(".")
    return type(name, (), {"__module__": module, "__init__": refuse, "__call__": refuse})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Meta-path hook answering `roots` and their submodules with _StubModule packages."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = tuple(sorted(set(roots)))

    def _covers(self, fullname: str) -> bool:
        return any(fullname == root or fullname.startswith(root + ".") for root in self.roots)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not self._covers(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []  # a package, so that `import root.sub` works too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is empty."""


def missing(names: Iterable[str]) -> list[str]:
    """Those of `names` that cannot be imported here (their top-level package is absent)."""
    return [name for name in names if importlib.util.find_spec(name.split(".")[0]) is None]


def install_stubs(always: Iterable[str], if_missing: Iterable[str] = ()) -> list[str]:
    """Stub the modules `always` plus those of `if_missing` that are not installed; returns the
    stubbed names. Call before importing the authors' code (already imported modules stay)."""
    roots = sorted(set(always) | set(missing(if_missing)))
    for name in roots:
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]  # e.g. a real torch.utils.tensorboard half-imported earlier
    sys.meta_path.insert(0, _StubFinder(roots))
    return roots
