#!/usr/bin/env bash
# crosslock's benchmarks against the peers, in one run, on one throwaway redis-server.
#
#   bash bench/run.sh            full run (about 10-15 min): regenerates bench/RESULTS.md
#   bash bench/run.sh --smoke    tiny counts (CI): every scenario runs once, counters must be exact;
#                                writes bench/results-raw/RESULTS-smoke.md, never RESULTS.md
#   extra options go to bench/harness.py, e.g. --only uncontended,handoff  --libs crosslock,redis-py;
#                                a run of a subset writes bench/results-raw/RESULTS-partial.md, never
#                                RESULTS.md (which stands for one full run)
#
# ./dev bench builds the bindings first and then calls this. This script needs them built
# (./dev build); it installs the peers itself: bench/.venv (bench/requirements.txt) and
# bench/node_modules (bench/package.json, npm install), and builds bench/rust (crosslock-bench).
# Raw results: bench/results-raw/<date>.json (git-ignored). Exit status 1 if any scenario crashed,
# timed out or ended with a wrong counter.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH")
cd "$BENCH"

SMOKE=0
PARTIAL=0
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE=1 ;;
    # A subset of the scenarios or libraries is not the run RESULTS.md stands for.
    --only|--only=*|--libs|--libs=*) PARTIAL=1 ;;
  esac
done

step() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "bench/run.sh: $*" >&2; exit 1; }

# CROSSLOCK_REDIS_BIN=<dir of a server build> (as for the tests): its redis-server and redis-cli
# run the benchmark's servers instead of the ones on PATH (and its redis-benchmark, when it has one).
if [ -n "${CROSSLOCK_REDIS_BIN:-}" ]; then PATH=$CROSSLOCK_REDIS_BIN:$PATH; fi
for tool in redis-server redis-benchmark redis-cli node npm cargo; do
  command -v "$tool" >/dev/null || die "$tool not found (./dev build installs redis-server and redis-tools)"
done
ROOT_PY=$ROOT/.venv/bin/python
[ -x "$ROOT_PY" ] && "$ROOT_PY" -c 'import crosslock; crosslock.connect' 2>/dev/null \
  || die "the Python binding is not built in $ROOT/.venv: run ./dev build (./dev bench does it)"
node -e "require('$ROOT')" 2>/dev/null \
  || die "the Node binding is not built: run ./dev build (./dev bench does it)"

# Python peers in bench/.venv; crosslock itself comes from the repo's one build (a .pth file points
# at the package the root venv imports), so there is never a second build to keep in sync.
PY=$BENCH/.venv/bin/python
if [ ! -x "$PY" ]; then
  step "creating bench/.venv"
  "$ROOT_PY" -m venv "$BENCH/.venv"
fi
if [ ! -f "$BENCH/.venv/.deps-stamp" ] || [ requirements.txt -nt "$BENCH/.venv/.deps-stamp" ]; then
  step "installing the Python peers (bench/requirements.txt)"
  "$PY" -m pip install -q --disable-pip-version-check -r requirements.txt
  touch "$BENCH/.venv/.deps-stamp"
fi
CROSSLOCK_PATH=$("$ROOT_PY" -c 'import crosslock, os; print(os.path.dirname(os.path.dirname(os.path.abspath(crosslock.__file__))))')
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$CROSSLOCK_PATH" > "$SITE/crosslock-repo.pth"
"$PY" -c 'import crosslock, redis, redis_lock, pottery' || die "bench/.venv cannot import crosslock and the peers"

if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ]; then
  step "installing the Node peers (bench/package.json)"
  npm install --no-audit --no-fund --loglevel=error
fi

if [ $SMOKE = 1 ]; then
  step "building crosslock-bench (debug: the smoke run checks behaviour, not speed)"
  cargo build -q -p crosslock-bench --manifest-path "$ROOT/Cargo.toml"
  RUST_BIN=$ROOT/target/debug/crosslock-bench
else
  step "building crosslock-bench (release)"
  cargo build -q --release -p crosslock-bench --manifest-path "$ROOT/Cargo.toml"
  RUST_BIN=$ROOT/target/release/crosslock-bench
fi

# A throwaway redis-server on a free loopback port, stopped on every exit path.
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TMP=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis.log" --maxclients 20000 &
REDIS_PID=$!
CLUSTER_PIDS=()
cleanup() {
  kill "$REDIS_PID" "${CLUSTER_PIDS[@]}" 2>/dev/null || true
  wait "$REDIS_PID" "${CLUSTER_PIDS[@]}" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 200); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server did not start: $(cat "$TMP/redis.log")"
  sleep 0.05
done
redis-cli -p "$PORT" ping >/dev/null || die "redis-server did not answer on port $PORT"
URL=redis://127.0.0.1:$PORT/0

# A Redis Cluster for the cluster scenario: three masters with a replica each.
CLUSTER_NODES=()
for i in 1 2 3 4 5 6; do
  # A port whose bus port (the port + 10000, the only one Redis 6.2 has) is free too: the test
  # fixtures' choice (tests-py/support.py).
  CPORT=$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from support import free_cluster_port; print(free_cluster_port())' "$ROOT/tests-py")
  mkdir -p "$TMP/cluster-$CPORT"
  redis-server --port "$CPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/cluster-$CPORT" \
    --logfile "$TMP/cluster-$CPORT/redis.log" --cluster-enabled yes --cluster-node-timeout 5000 &
  CLUSTER_PIDS+=($!)
  CLUSTER_NODES+=("127.0.0.1:$CPORT")
  for _ in $(seq 200); do redis-cli -p "$CPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
redis-cli --cluster create "${CLUSTER_NODES[@]}" --cluster-replicas 1 --cluster-yes >/dev/null \
  || die "redis-cli --cluster create failed"
for _ in $(seq 300); do
  ok=1
  for node in "${CLUSTER_NODES[@]}"; do
    redis-cli -p "${node##*:}" cluster info 2>/dev/null | grep -q cluster_state:ok || ok=0
  done
  [ $ok = 1 ] && break
  sleep 0.1
done
[ $ok = 1 ] || die "the bench cluster did not settle"
CLUSTER_URL="redis+cluster://${CLUSTER_NODES[0]},${CLUSTER_NODES[1]}"

mkdir -p results-raw
STAMP=$(date +%Y%m%d-%H%M%S)
if [ $SMOKE = 1 ]; then
  RAW=results-raw/smoke-$STAMP.json; REPORT=results-raw/RESULTS-smoke.md; LIMIT=300
else
  RAW=results-raw/$STAMP.json; REPORT=RESULTS.md; LIMIT=3600
  [ $PARTIAL = 0 ] || REPORT=results-raw/RESULTS-partial.md
fi
step "running the scenarios on $URL (raw results: bench/$RAW)"
status=0
timeout --kill-after=10 "$LIMIT" "$PY" harness.py --url "$URL" --cluster-url "$CLUSTER_URL" --out "$RAW" --rust-bin "$RUST_BIN" "$@" || status=$?
if [ -f "$RAW" ]; then
  "$PY" report.py "$RAW" "$REPORT"
  step "wrote bench/$REPORT"
fi
[ $status = 0 ] || echo "bench/run.sh: some scenarios failed (exit $status); see above and bench/$REPORT" >&2
exit $status
