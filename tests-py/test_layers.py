"""House rule: the host layers import downwards. The objects that are not locks (semaphores,
latch) take their argument checks from ``_args.py`` / ``args.ts`` and never import the lock
family's base (``_lockable.py`` / ``lockable.ts``), nor, in Python, the client module (what they
need of it is ``_types.ClientLike``); the shared leaves import only other leaves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = ROOT / "bindings-python" / "python" / "crosslock"
TS = ROOT / "bindings-node" / "lib"

#: Leaves: what each may import from the package (besides the native module).
PY_LEAVES = {
    "_args.py": {"_limits", "errors"},
    "_types.py": set(),
    "_acquisition.py": {"errors"},
}
TS_LEAVES = {"args.ts": {"errors", "identity", "limits"}}

NOT_LOCKS_PY = ["semaphore.py", "permit_expirable_semaphore.py", "count_down_latch.py"]
NOT_LOCKS_TS = ["semaphore.ts", "permit_expirable_semaphore.ts", "count_down_latch.ts"]


def _py_imports(path: Path) -> set[str]:
    """The package modules ``path`` imports (``from .x import``, ``from . import x``), anywhere in it."""
    text = path.read_text()
    found = set(re.findall(r"^\s*from \.(\w+) import", text, re.M))
    for names in re.findall(r"^\s*from \. import ([\w, ]+)", text, re.M):
        found |= {n.strip() for n in names.split(",")}
    return found - {"_native"}


def _ts_imports(path: Path) -> set[str]:
    """The modules of lib/ that ``path`` imports, type-only imports included."""
    return set(re.findall(r"^import .*from '\./(\w+)'", path.read_text(), re.M))


def test_objects_that_are_not_locks_do_not_import_the_lock_base_or_the_client() -> None:
    for name in NOT_LOCKS_PY:
        assert not _py_imports(PY / name) & {"_lockable", "client"}, name
    # In TypeScript their public `client` field is typed `Client`: a type-only import of
    # ./client stays (erased at run time), so only the lock base is ruled out there.
    for name in NOT_LOCKS_TS:
        assert "lockable" not in _ts_imports(TS / name), name


def test_shared_leaves_import_only_leaves() -> None:
    for name, allowed in PY_LEAVES.items():
        assert _py_imports(PY / name) <= allowed, (name, _py_imports(PY / name) - allowed)
    for name, allowed in TS_LEAVES.items():
        assert _ts_imports(TS / name) <= allowed, (name, _ts_imports(TS / name) - allowed)
