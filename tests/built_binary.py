"""Where the Python suites (tests/interop, tests/soak) find a binary this workspace builds.

``$ENV_VAR`` when set (CI sets ``MINIKAFKA_BIN`` to the build it means), else the most recently
built of ``release`` and ``debug`` under the cargo target directory, so a stale release build
never shadows the debug build just made.
"""

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def built_binary(name, env_var):
    """The path of binary ``name``, or None when it is not built."""
    path = os.environ.get(env_var)
    if path:
        return path
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    built = [p for p in (target / "release" / name, target / "debug" / name) if p.exists()]
    if not built:
        return None
    return str(max(built, key=lambda p: p.stat().st_mtime))
