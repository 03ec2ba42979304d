#!/usr/bin/env bash
# crosslock's one task script.
#
#   ./dev.sh demo    start a throwaway redis-server, run a Python and a Node process contending on one lock
#   ./dev.sh test    install what is missing, build once, run every suite (cargo, pytest, node --test;
#                    the Java/Redisson interop cases run inside pytest and node --test) and a smoke
#                    run of the benchmarks
#   ./dev.sh bench   run the benchmarks against the peers and regenerate bench/RESULTS.md
#   ./dev.sh build   only install what is missing and build the bindings
#
# Everything it installs stays in the repo (.venv/, node_modules/, target/, tests-java/target/), except
# Debian's redis-server, installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
VENV=$ROOT/.venv
PY=$VENV/bin/python
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || ! command -v openssl >/dev/null; then
    step "installing redis-server and openssl (Debian)"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-tools openssl >/dev/null
  fi
}

ensure_python() {
  if [ ! -x "$PY" ]; then
    step "creating .venv"
    python3 -m venv "$VENV"
  fi
  if ! "$PY" -c 'import maturin, pytest, pytest_asyncio' 2>/dev/null \
     || [ tests-py/requirements.txt -nt "$VENV/.deps-stamp" ]; then
    step "installing Python test dependencies"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r tests-py/requirements.txt
    touch "$VENV/.deps-stamp"
  fi
  step "building the Python binding (maturin develop --release)"
  ( cd "$ROOT" && VIRTUAL_ENV=$VENV "$VENV/bin/maturin" develop --release -q 2>&1 | grep -v '^📦\|^🔗\|^🐍\|^💻\|^🍹' || true )
  "$PY" -c 'import crosslock' || { echo "the Python binding did not build"; exit 1; }
}

ensure_node() {
  if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ] \
     || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    step "npm install"
    npm install --no-audit --no-fund --loglevel=error
  fi
  step "building the Node binding (npm run build)"
  npm run -s build
}

ensure_java() {
  if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    step "installing a JDK and Maven (Debian), for the Redisson interop driver"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq default-jdk-headless maven >/dev/null
  fi
  step "building the Redisson interop driver (tests-java)"
  bash tests-java/build.sh
}

build() {
  ensure_redis
  ensure_python
  ensure_node
  ensure_java
}

run_tests() {
  local failed=()
  step "cargo test (core)"
  cargo test -p crosslock --quiet 2>&1 || failed+=(cargo)
  step "cargo clippy (core)"
  cargo clippy -p crosslock --all-targets --quiet -- -D warnings 2>&1 || failed+=(clippy)
  step "pytest"
  "$PY" -m pytest tests-py -q -p no:cacheprovider || failed+=(pytest)
  step "node --test"
  npm test --silent || failed+=(node)
  step "bench smoke run (tiny counts: every scenario runs, counters must be exact)"
  bash bench/run.sh --smoke || failed+=(bench-smoke)
  if [ ${#failed[@]} -gt 0 ]; then
    echo; echo "FAILED suites: ${failed[*]}"; exit 1
  fi
  echo; echo "all suites passed"
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

demo() {
  build_quiet() { build >/tmp/crosslock-demo-build.log 2>&1 || { cat /tmp/crosslock-demo-build.log; exit 1; }; }
  echo "building (first run takes a few minutes; log: /tmp/crosslock-demo-build.log)..."
  ensure_redis; build_quiet
  local port dir
  port=$(free_port); dir=$(mktemp -d)
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  trap 'redis-cli -p '"$port"' shutdown nosave >/dev/null 2>&1 || true; rm -rf '"$dir" EXIT
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  local url="redis://127.0.0.1:$port/0"
  echo "throwaway redis-server on $url"
  echo "a Python and a Node process now take turns on the lock 'demo:orders' (each holds it 300 ms, 3 times):"
  echo
  "$PY" examples/demo.py "$url" & local py=$!
  node examples/demo.mjs "$url" & local js=$!
  wait $py $js
  echo
  echo "the lock in Redis is a hash at 'demo:orders', exactly as Java's Redisson stores an RLock."
}

case "${1:-}" in
  test) build; run_tests ;;
  build) build ;;
  demo) demo ;;
  bench) shift; build; exec bash bench/run.sh "$@" ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
