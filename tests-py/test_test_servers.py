"""The suites' own redis-servers never outlive the process that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import Raw, wait_until

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_killed_test_process_leaves_no_server_running(how):
    # A test process that dies without running a finalizer (a CI runner's timeout, `kill -9`):
    # its server stops anyway, and its directory goes.
    program = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(HERE)!r})
        from support import RedisServer
        server = RedisServer()
        print(server.port, server.dir, flush=True)
        os.kill(os.getpid(), signal.{how})
        """
    )
    child = subprocess.run([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, timeout=30)
    assert child.returncode == -getattr(signal, how), child
    port, directory = child.stdout.split()

    def gone() -> bool:
        try:
            Raw(int(port), timeout=0.5).close()
        except OSError:
            return not os.path.exists(directory)
        return False

    wait_until(gone, timeout=10, what=f"the server on port {port} to stop and {directory} to go")
