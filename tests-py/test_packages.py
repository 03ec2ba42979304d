"""The packages install like any other and work outside the checkout: the wheel (abi3,
manylinux2014: built by ./dev with `maturin build --zig` into target/dist) into a fresh venv with
no Rust and no index, the sdist (`maturin sdist`) into a fresh venv that builds it with Rust, and
the npm tarball (target/dist's: ./dev's `npm pack` of the checkout, whose addon is built for glibc
2.17 by `napi build --cross-compile`, cargo-zigbuild) into a fresh Node project with no network (run by Node, Bun and Deno, which imports it from
node_modules and as `npm:crosslock`); each then runs a short program against a real server,
through `import`, `require` and the `crosslock` command. (`cargo package -p crosslock` is checked
by ./dev test.)"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "target" / "dist"  # the release artefacts, built once by ./dev build


def artefact(pattern: str) -> Path:
    """The one artefact of target/dist that matches ``pattern``."""
    found = sorted(DIST.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {DIST} (run ./dev build), found {found}"
    return found[0]

PY_PROGRAM = """
import sys, crosslock
assert "site-packages" in crosslock.__file__, crosslock.__file__
with crosslock.connect(sys.argv[1]) as client:
    with client.lock("pkg:py") as _:
        print("held", client.inspect("pkg:py")["holders"][0]["holds"])
"""

MJS_PROGRAM = """
import { connect } from 'crosslock'
const client = await connect(process.argv[2])
const held = await client.lock('pkg:mjs').acquire()
console.log('held', (await client.inspect('pkg:mjs')).holders[0].holds)
await held.release()
await client.close()
"""

# Metrics or spans asked for where the OpenTelemetry API is not installed (an optional dependency
# in both packages): refused, saying what to install, before anything connects.
PY_METRICS_PROGRAM = """
import sys, crosslock
for asked in ({"metrics": True}, {"spans": True}):
    try:
        crosslock.connect(sys.argv[1], **asked)
    except ImportError as e:
        print(e)
"""

MJS_METRICS_PROGRAM = """
import { connect } from 'crosslock'
for (const asked of [{ metrics: true }, { spans: true }]) {
  await connect(process.argv[2], asked).then(() => console.log('connected'), (e) => console.log(e.message))
}
"""

CJS_PROGRAM = """
const { connect } = require('crosslock')
;(async () => {
  const client = await connect(process.argv[2])
  await client.lock('pkg:cjs').withLock(async () => console.log('held'))
  await client.close()
})()
"""


def run(cmd: list, cwd: Path, timeout: float = 300, env: dict | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.mark.timeout(600)
def test_the_wheel_installs_into_a_fresh_venv_without_rust_and_works(url, raw, tmp_path):
    wheel = artefact("crosslock-*.whl")
    # glibc ≥ 2.17 (RHEL/CentOS 7 and later): tests-versions/run.sh checks the binary's symbols.
    assert "-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64" in wheel.name, wheel.name
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    clean["PATH"] = f"{env_dir / 'bin'}:/usr/bin:/bin"  # no cargo, no rustc
    run([str(python), "-m", "pip", "install", "-q", "--no-index", str(wheel)], tmp_path, env=clean)
    assert run([str(python), "-c", PY_PROGRAM, url], tmp_path, env=clean).split() == ["held", "1"]
    refused = run([str(python), "-c", PY_METRICS_PROGRAM, url], tmp_path, env=clean).splitlines()
    assert len(refused) == 2 and all("pip install opentelemetry-api" in r for r in refused), refused
    assert "connect(metrics=...)" in refused[0] and "connect(spans=...)" in refused[1], refused
    listed = run([str(env_dir / "bin" / "crosslock"), "--url", url, "list", "--json"], tmp_path, env=clean)
    assert listed == ""  # nothing left: the program released its lock
    assert raw.command("KEYS", "*") == []


@pytest.mark.timeout(300)
def test_the_npm_tarball_installs_into_a_fresh_project_offline_and_works(url, raw, tmp_path):
    tarball = artefact("crosslock-*.tgz")
    files = {f.removeprefix("package/") for f in run(["tar", "tzf", str(tarball)], tmp_path).split()}
    assert {"bindings-node/dist/index.js", "bindings-node/dist/cli.js", "bindings-node/native.js", "LICENSE"} <= files
    assert "bindings-node/crosslock.linux-x64-gnu.node" in files, "the prebuilt addon is not in the package"
    project = tmp_path / "app"
    project.mkdir()
    (project / "package.json").write_text('{"name": "app", "version": "1.0.0", "private": true}')
    run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", str(tarball)], project)
    (project / "program.mjs").write_text(MJS_PROGRAM)
    (project / "program.cjs").write_text(CJS_PROGRAM)
    assert run(["node", "program.mjs", url], project).split() == ["held", "1"]
    assert run(["node", "program.cjs", url], project).split() == ["held"]
    (project / "metrics.mjs").write_text(MJS_METRICS_PROGRAM)
    refused = run(["node", "metrics.mjs", url], project).splitlines()
    assert len(refused) == 2 and all("npm install @opentelemetry/api" in r for r in refused), refused
    assert "{ metrics }" in refused[0] and "{ spans }" in refused[1], refused
    # Bun and Deno (the checkout's dev dependencies) run the installed package as it is; Deno also
    # as `npm:crosslock`, resolved from the project's node_modules (its package.json lists it).
    bun, deno = ROOT / "node_modules" / ".bin" / "bun", ROOT / "node_modules" / ".bin" / "deno"
    quiet = {**os.environ, "DENO_NO_UPDATE_CHECK": "1"}
    assert run([str(bun), "program.mjs", url], project).split() == ["held", "1"]
    assert run([str(bun), "program.cjs", url], project).split() == ["held"]
    assert run([str(deno), "run", "-A", "program.mjs", url], project, env=quiet).split() == ["held", "1"]
    (project / "program-npm.mjs").write_text(MJS_PROGRAM.replace("from 'crosslock'", "from 'npm:crosslock'"))
    assert run([str(deno), "run", "-A", "program-npm.mjs", url], project, env=quiet).split() == ["held", "1"]
    listed = run([str(project / "node_modules" / ".bin" / "crosslock"), "--url", url, "list"], project)
    assert listed == ""
    assert raw.command("KEYS", "*") == []


@pytest.mark.timeout(900)
def test_the_sdist_builds_with_rust_into_a_fresh_venv_and_works(url, raw, tmp_path):
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "maturin", "sdist", "-o", str(dist)], ROOT, timeout=120,
        env={**os.environ, "VIRTUAL_ENV": str(Path(sys.executable).parents[1])})
    [sdist] = list(dist.glob("*.tar.gz"))
    listing = run(["tar", "tzf", str(sdist)], tmp_path).split()
    top = listing[0].split("/")[0]
    for needed in ("core/src/lib.rs", "core/src/scripts", "bindings-python/src/lib.rs", "pyproject.toml", "LICENSE"):
        assert any(p.startswith(f"{top}/{needed}") for p in listing), f"{needed} is missing from the sdist"
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # pip fetches the build backend (maturin) from the index; cargo builds everything from the
    # sdist's own sources in a target directory of its own. Unoptimized, only to keep CI short:
    # the sources and the build are what is being proven.
    clean.update(CARGO_TARGET_DIR=str(tmp_path / "target"), CARGO_PROFILE_RELEASE_OPT_LEVEL="0",
                 CARGO_PROFILE_RELEASE_LTO="off", CARGO_PROFILE_RELEASE_CODEGEN_UNITS="256", CARGO_INCREMENTAL="0")
    run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", str(sdist)], tmp_path, env=clean, timeout=840)
    assert run([str(python), "-c", PY_PROGRAM, url], tmp_path, env=clean).split() == ["held", "1"]
    assert raw.command("KEYS", "*") == []
