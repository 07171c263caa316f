"""Package attributes imported on first use (PEP 562), so that importing a package's light
modules (tabrepro.models.npt.config, tabrepro.models.bishop.config: needed by the model registry, hence by
every Snakemake start) does not import torch through the package's __init__."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, **names_by_module: tuple[str, ...]) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and a module-level `__getattr__` for `package`, given the names each submodule
    defines; a name's submodule is imported when the name is first looked up."""
    homes = {name: module for module, names in names_by_module.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{homes[name]}"), name)

    return list(homes), __getattr__
