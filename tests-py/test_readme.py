"""The README's Python examples run as written (against this test's server)."""

from __future__ import annotations

import re
from pathlib import Path

import crosslock

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    """The ```python blocks of the README's "## Python" section, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_python_tour_runs(url, raw, capsys):
    blocks = python_blocks()
    assert len(blocks) >= 2, "the README's Python section lost its examples"
    tour, on_lost = blocks[0], blocks[1]
    assert "redis://127.0.0.1:6379/0" in tour
    namespace: dict = {}
    exec(compile(tour.replace("redis://127.0.0.1:6379/0", url), "README.md (tour)", "exec"), namespace)
    assert namespace["client"].closed
    assert capsys.readouterr().out.strip() == "False False 0 None"
    assert raw.command("EXISTS", "orders:42") == 0

    # The lost-lock example continues with a client of its own.
    with crosslock.connect(url) as client:
        namespace = {"client": client, "crosslock": crosslock}
        exec(compile(on_lost, "README.md (on_lost)", "exec"), namespace)
        assert namespace["lock"].on_lost is not None
        assert not namespace["lock"].locked()

    # The tour of every other lock type, too.
    assert len(blocks) >= 3, "the README's Python section lost its lock-type examples"
    with crosslock.connect(url) as client:
        exec(compile(blocks[2], "README.md (lock types)", "exec"), {"client": client, "crosslock": crosslock})
        assert "write with token 1" in capsys.readouterr().out
    # Only the fenced lock's token counter outlives its lock (as Redisson's does).
    assert raw.command("KEYS", "*") == ["redisson_lock_token:{ledger}"]


def test_readme_python_synchronizer_tour_runs(url, raw):
    blocks = python_blocks()
    assert len(blocks) >= 4, "the README's Python section lost its synchronizer examples"
    assert "semaphore" in blocks[3] and "MultiLock" in blocks[3]
    with crosslock.connect(url) as client:
        exec(compile(blocks[3], "README.md (synchronizers)", "exec"), {"client": client, "crosslock": crosslock})
    # Every permit is back, the latch is open, and no lock is left.
    assert raw.command("GET", "renderers") == "3"
    assert raw.command("GET", "licenses") == "2"
    assert raw.command("ZCARD", "{licenses}:timeout") == 0
    assert sorted(raw.command("KEYS", "*")) == ["licenses", "renderers"]


def test_readme_python_owner_handoff_runs(url, raw):
    blocks = python_blocks()
    assert len(blocks) >= 5 and "crosslock.Owner()" in blocks[4], "the README lost its hand-off example"
    with crosslock.connect(url) as client:
        namespace = {"client": client, "crosslock": crosslock}
        exec(compile(blocks[4], "README.md (hand-off)", "exec"), namespace)
        assert raw.hgetall("orders:42") == {f"{client.id}:{namespace['owner'].number}": "1"}
        import threading

        t = threading.Thread(target=namespace["finish"])
        t.start()
        t.join(30)
        assert raw.command("EXISTS", "orders:42") == 0


def test_readme_python_asyncio_example_runs(url, raw):
    blocks = python_blocks()
    assert len(blocks) >= 6 and "lost_event()" in blocks[5], "the README lost its asyncio example"
    with crosslock.connect(url) as client:
        exec(compile(blocks[5], "README.md (asyncio)", "exec"), {"client": client, "crosslock": crosslock})
    assert raw.command("EXISTS", "orders:42") == 0


DOCS = [README, README.parent / "docs" / "api.md"]
ROOT = README.parent
LIB_RS = ROOT / "core" / "src" / "lib.rs"
_MARK = re.compile(r"^<!-- (run by: (?P<by>\S+)|not run: (?P<why>.+?)) -->$")


def code_blocks(path: Path) -> list[tuple[int, str, str, str]]:
    """Every fenced block of `path`: (line, info string, section heading, the line above)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks, section, i = [], "", 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        m = re.match(r"^```(\S*)", lines[i])
        if m:
            blocks.append((i + 1, m.group(1), section, lines[i - 1] if i else ""))
            i += 1
            while not lines[i].startswith("```"):
                i += 1
        i += 1
    return blocks


def test_every_code_block_of_the_docs_is_run_or_says_why_not():
    """Each block of README.md and docs/api.md (a block added later included) is either Rust,
    compiled by rustdoc through core/src/lib.rs, or marked on the line above with
    ``<!-- run by: <test file> -->`` (a test file that reads that document's section) or
    ``<!-- not run: <why> -->``."""
    lib = LIB_RS.read_text(encoding="utf-8")
    problems = []
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        assert f'include_str!("../../{name}")' in lib, f"{name} is not compiled by rustdoc (core/src/lib.rs)"
        for line, info, section, above in code_blocks(path):
            where = f"{name}:{line} ({info or 'no language'}, section {section!r})"
            if info.split(",")[0] == "rust":
                continue  # a doctest of core (`rust,no_run` is compiled too)
            mark = _MARK.match(above.strip())
            if not mark:
                problems.append(f"{where}: no <!-- run by: … --> or <!-- not run: … --> above it")
            elif mark.group("by"):
                test = ROOT / mark.group("by")
                if not test.is_file():
                    problems.append(f"{where}: {mark.group('by')} does not exist")
                else:
                    text = test.read_text(encoding="utf-8")
                    if path.name not in text or f"## {section}" not in text:
                        problems.append(f"{where}: {mark.group('by')} does not read {path.name}'s '## {section}'")
            elif len(mark.group("why").split()) < 3:
                problems.append(f"{where}: say why it is not run")
    assert not problems, "\n".join(problems)
