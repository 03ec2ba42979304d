"""``./dev demo`` runs as the README promises: a throwaway server, the processes taking turns, the
lock's hash shown as Redis has it. (``--no-build``: the suite has built everything already.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dev_demo_takes_turns_and_shows_the_hash():
    out = subprocess.run(["bash", str(ROOT / "dev"), "demo", "--no-build"], capture_output=True, text=True,
                         timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    turns = re.findall(r"^\d\d:\d\d:\d\d\.\d{3}  (python|node|java)\s+\(pid \d+\) holds demo:orders as (\S+)", out.stdout, re.M)
    java = shutil.which("java") is not None and (ROOT / "tests-java" / "target" / "classpath.txt").exists()
    expected = {"python", "node"} | ({"java"} if java else set())
    assert sorted(who for who, _ in turns) == sorted(list(expected) * 3), out.stdout
    # The hash shown while Python held it: its own holder string -> 1, with the watchdog lease.
    python_holder = next(holder for who, holder in turns if who == "python")
    assert f"redis> HGETALL demo:orders  →  {python_holder} 1" in out.stdout, out.stdout
    pttl = int(re.search(r"redis> PTTL demo:orders  →  (\d+)", out.stdout).group(1))
    assert 20000 < pttl <= 30000
