"""Parts defined outside this package: modules that register algorithms, datasets, models, ….

A plugin is a module whose import registers its parts (``@ALGORITHMS.register("mine")``). Two
ways name it, read by every process that looks parts up (the CLI, the API, the worker), so a
run submitted to one is understood by the others:

- an installed package's entry point in the group ``dpfl.plugins`` (its value a module), as
  pytest and Flower find their plugins;
- ``DPFL_PLUGINS``: importable module names separated by commas, for a module of your own.

`dpfl.algorithms` loads them once its own algorithms are registered.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

from dpfl.errors import PluginError

__all__ = ["ENV_VAR", "GROUP", "load_plugins", "plugin_modules"]

GROUP = "dpfl.plugins"
ENV_VAR = "DPFL_PLUGINS"
_loaded: set[str] = set()


def plugin_modules() -> list[str]:
    """Returns the plugin modules to import: the installed entry points', then `DPFL_PLUGINS`'."""
    named = [point.value for point in entry_points(group=GROUP)]
    named += [name.strip() for name in os.environ.get(ENV_VAR, "").split(",") if name.strip()]
    return list(dict.fromkeys(named))


def load_plugins() -> None:
    """Imports every plugin module not imported yet; raises PluginError naming a missing one, or
    one that raised on import."""
    for name in plugin_modules():
        if name in _loaded:
            continue
        where = f"{ENV_VAR} or a {GROUP} entry point"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            raise PluginError(f"plugin {name!r} ({where}) is not an importable module") from None
        except Exception as exc:  # the plugin's own error: one line, its traceback under --debug
            raise PluginError(
                f"plugin {name!r} ({where}) failed to import: {type(exc).__name__}: {exc} "
                "(dpfl --debug shows where)"
            ) from exc
        _loaded.add(name)
