"""The hand-written stub of the native module matches the compiled module (mypy's stubtest),
and the public package type-checks strictly against it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bindings-python" / "python" / "crosslock"


def test_native_stub_matches_the_compiled_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "crosslock._native"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_type_checks_strictly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(PACKAGE)],
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
