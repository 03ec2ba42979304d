#!/usr/bin/env bash
# Build the Java interop driver (Redisson wrapper) once; later runs are no-ops while
# target/classes is newer than the sources and every jar in target/classpath.txt exists.
# First run downloads Redisson + deps from Maven Central into ~/.m2 (or $MAVEN_REPO_LOCAL).
# Safe to run concurrently (serialised with flock on target/.build.lock).
set -euo pipefail
cd "$(dirname "$0")"

mkdir -p target
exec 9>target/.build.lock
if ! flock -w 600 9; then
    echo "tests-java: timed out waiting for another build" >&2
    exit 1
fi

up_to_date() {
    local stamp=target/classes/crosslock/interop/Driver.class jars j
    [[ -f $stamp && -s target/classpath.txt ]] || return 1
    [[ -z $(find pom.xml src -newer "$stamp" -print -quit) ]] || return 1
    IFS=: read -r -a jars <target/classpath.txt || true
    for j in "${jars[@]}"; do
        [[ -f $j ]] || return 1
    done
}

if up_to_date; then
    echo "tests-java: driver up to date"
    exit 0
fi

mvn_args=(-q -B)
if [[ -n ${MAVEN_REPO_LOCAL:-} ]]; then
    mvn_args+=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")
fi

start=$(date +%s%N)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# bounded: a fresh ~/.m2 takes well under a minute
if ! timeout 600 mvn "${mvn_args[@]}" compile >"$log" 2>&1; then
    cat "$log" >&2
    echo "tests-java: build FAILED" >&2
    exit 1
fi
# make the stamp newer than the sources even if mvn decided nothing needed recompiling
touch target/classes/crosslock/interop/Driver.class
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf 'tests-java: driver built in %d.%03ds\n' $((ms / 1000)) $((ms % 1000))
