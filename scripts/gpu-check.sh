#!/usr/bin/env bash
# scripts/gpu-check.sh - the whole GPU check of the CUDA backend in one call.
#
# Here (a machine with Rust, no GPU):
#   scripts/gpu-check.sh
#       builds the release `mgws` binary and the kernel PTX (`cargo xtask ptx`), stages both and a
#       CONTAINS corpus into .device-carry/ (git-ignored), checks that the binary needs nothing but
#       glibc (and libcuda, loaded at run time), and prints the device `run` invocations to use.
#
# On the GPU machine (CUDA driver, no Rust; the working tree plus .device-carry/ carried over):
#   bash scripts/gpu-check.sh --on-device [SECTIONS]
#       runs the workloads on the GPU with verification and timing and prints one table; every
#       run's full output goes to $OUT/gpu-check/ (the table too: $OUT/gpu-check/table.txt).
#       SECTIONS is a comma list (default: memset,uts,contains,fib,custom,faults,sanitizer):
#         memset     MEMSET 2^26: global and host placement, the three termination modes, CPU
#                    workers beside the GPU, both
#                    overflow modes, queue sharing 1/2/4, block sizes 32/128/512, initial
#                    tasks in host memory, 128- and 255-register caps; the static baseline alongside
#         uts        UTS T1, T3, T5 (published counts) and T1L (~1e8 nodes, sequential check),
#                    each with the kernel-per-level baseline
#         contains   CONTAINS on the carried corpus against a sequential scan, static baseline
#         fib        FIB(30), kernel-per-level baseline
#         faults     a stalled task under a short watchdog (hang error) and an unknown tag
#         custom     the custom-task example: a user registry with its own kernel (Collatz),
#                    embedded in the example's binary, in one process and over 2 GPU PEs; the
#                    N-Queens example (N = 15 twice, with each process's wall time)
#         sweep      MEMSET, UTS T1L and T3 at 132..2112 workers with their baselines (not in
#                    the default list)
#         gpu-bench  `mgws bench gpu` over 4..32 workers per SM (mgws, lean static, levels, the
#                    nvcc-built reference) and `mgws bench skew` on the GPU, into $OUT/gpu-bench
#                    (not in the default list)
#         sanitizer  compute-sanitizer memcheck, racecheck and synccheck on small runs of each
#                    workload (if compute-sanitizer is installed)
#         multi      two GPUs against one: MEMSET 2^27, UTS T1L, T1, T3, T5, FIB(34) and a small
#                    CONTAINS on --devices 0,1 in every termination mode, --placement remote,
#                    same-device bias, compute-sanitizer on a 2-GPU run (needs 2 GPUs joined by
#                    NVLink; not in the default list)
#         pes        GPU PE processes over NVSHMEM (`--processes 2`, one PE per GPU, both on GPU 0
#                    on a one-GPU machine, where they take turns): MEMSET, UTS T1L, T3, FIB
#                    against one process on the same GPUs, every termination mode, 3 PEs on one
#                    GPU or 4 on two, a hang and an unknown tag over PEs, compute-sanitizer on
#                    every PE (not in the default list)
#         pes-api    the same over NVSHMEM's device API (`--pe-transport device-api`, the kernel of
#                    `cargo xtask ptx --nvshmem`), against the mapped transport and one process,
#                    also with every PE reached through NVSHMEM's calls (MGWS_NVSHMEM_CALLS_ONLY=1)
#                    (not in the default list)
#         nodes      a run across nodes on one machine (needs 2 GPUs): two launchers, `--nodes 2
#                    --node-rank 0|1`, one PE each (GPU 0 and GPU 1), joined over TCP on the
#                    loopback interface, over the device API: MEMSET 2^27, UTS T1L, FIB(34) against
#                    the same 2 PEs from one launcher, also with every word through NVSHMEM's calls
#                    (as on separate nodes); a hang across the nodes (not in the default list)
#         bench-multi  `mgws bench multi` on 1, 2 and 4 GPUs (as many as there are) in one process
#                    and as PEs, then compute-sanitizer with the data layouts on every GPU and
#                    over one PE per GPU (needs 2 GPUs; not in the default list)
#         nodes-mpirun  the same two launchers started by Open MPI's mpirun (one app context per
#                    GPU, ranks from OMPI_COMM_WORLD_RANK): MEMSET 2^27, UTS T1L, FIB(34) (needs 2
#                    GPUs and mpirun; not in the default list)
#       GPU_CHECK_BUDGET (seconds, default 560) bounds the whole call: cases that would start
#       after it are listed as skipped, so a 600 s device command always ends with the table.
#       GPU_CHECK_MEMSET_TASKS overrides the MEMSET size (default 67108864).
set -uo pipefail
cd "$(dirname "$0")/.."

CARRY=.device-carry
PTX_NAME=mgws_kernel.sm_90.ptx
NVSHMEM_PTX_NAME=mgws_kernel.sm_90.nvshmem.ptx

build_here() {
    set -e
    echo "== building the release host binary"
    cargo build --release -p mgws-cli
    echo "== building the kernel PTX"
    cargo xtask ptx --arch sm_90
    echo "== building the kernel PTX for GPU PEs over NVSHMEM's device API"
    cargo xtask ptx --arch sm_90 --nvshmem
    # The examples embed their kernel's cubin too where the build finds ptxas.
    if [ -z "${MGWS_PTXAS:-}" ] && ! command -v ptxas >/dev/null 2>&1 && [ -f ../shared/tools/ptxas.sh ]; then
        MGWS_PTXAS=$(bash ../shared/tools/ptxas.sh --path) && export MGWS_PTXAS
    fi
    echo "== building the custom-task example (a standalone crate: its build script builds its"
    echo "   kernel with mgws-builder and the host binary embeds the PTX and, with ptxas, its cubin)"
    cargo build --release --manifest-path examples/custom-task/Cargo.toml
    local example_ptx
    example_ptx=$(ls -t examples/custom-task/target/release/build/mgws-example-custom-task-*/out/mgws_example_custom_task.ptx | head -n 1)
    if ! grep -q '^.visible .global .align 8 .u64 mgws_[a-z0-9_]*_fingerprint = ' "$example_ptx"; then
        echo "error: the example's embedded kernel was not built: $(head -n 1 "$example_ptx")" >&2
        return 1
    fi
    echo "== building the N-Queens example (standalone, its kernel embedded the same way)"
    cargo build --release --manifest-path examples/nqueens/Cargo.toml
    if [ ! -f data/wiki-en.jsonl ]; then
        echo "== fetching a CONTAINS corpus (scripts/fetch-corpus.sh en)"
        bash scripts/fetch-corpus.sh en || echo "warning: no corpus; the contains section will be skipped"
    fi
    if [ ! -d data/manpages-de ]; then
        echo "== fetching the gzipped man pages (scripts/fetch-corpus.sh manpages-de)"
        bash scripts/fetch-corpus.sh manpages-de ||
            echo "warning: no man pages; contains-manpages-de will be skipped"
    fi
    echo "== staging into $CARRY/"
    rm -rf "$CARRY"
    mkdir -p "$CARRY/data"
    cp target/release/mgws "$CARRY/mgws"
    # Gzipped: both modules together are too big to carry as text (64 MiB).
    gzip -9c "target/ptx/$PTX_NAME" > "$CARRY/$PTX_NAME.gz"
    gzip -9c "target/ptx/$NVSHMEM_PTX_NAME" > "$CARRY/$NVSHMEM_PTX_NAME.gz"
    # The example's kernel is embedded in its binary (CustomTasks::KERNEL_PTX).
    cp examples/custom-task/target/release/custom-task "$CARRY/custom-task"
    cp examples/nqueens/target/release/nqueens "$CARRY/nqueens"
    [ -f data/wiki-en.jsonl ] && cp data/wiki-en.jsonl "$CARRY/data/"
    [ -d data/manpages-de ] && cp -r data/manpages-de "$CARRY/data/"
    git rev-parse HEAD > "$CARRY/COMMIT" 2>/dev/null || true
    git status --short > "$CARRY/STATUS" 2>/dev/null || true
    # Never committed: git-ignored here and locally excluded.
    grep -qxF "/$CARRY" .gitignore 2>/dev/null || echo "/$CARRY" >> .gitignore
    mkdir -p .git/info
    grep -qxF "/$CARRY" .git/info/exclude 2>/dev/null || echo "/$CARRY" >> .git/info/exclude
    echo "== run-time dependencies of $CARRY/mgws (libcuda is loaded at run time):"
    local bad=0
    for lib in $(readelf -d "$CARRY/mgws" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
        case "$lib" in
            libc.so.*|libm.so.*|libgcc_s.so.*|ld-linux-x86-64.so.*|libpthread.so.*|libdl.so.*|librt.so.*)
                echo "   $lib" ;;
            *) echo "   $lib   <- NOT glibc: the device machine may lack it"; bad=1 ;;
        esac
    done
    local glibc
    glibc=$(objdump -T "$CARRY/mgws" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    echo "   newest glibc symbol version needed: $glibc (Ubuntu 24.04 has GLIBC_2.39)"
    [ $bad = 0 ] || { echo "error: unexpected shared libraries" >&2; exit 1; }
    local size
    size=$(du -sm "$CARRY" | cut -f1)
    echo "== $CARRY/ is ${size} MiB (carry limit 64 MiB):"
    ls -la "$CARRY" "$CARRY/data"
    [ "$size" -lt 64 ] || { echo "error: $CARRY is too big to carry" >&2; exit 1; }
    cat <<EOF

== Copy $CARRY/ and scripts/ to a machine with an NVIDIA GPU, at the same relative paths (for
   example: rsync -a $CARRY scripts gpu-host:mgws/), and run there, from that directory:

   bash scripts/gpu-check.sh --on-device memset,uts,contains,fib
   bash scripts/gpu-check.sh --on-device sanitizer
   bash scripts/gpu-check.sh --on-device multi          # on a machine with 2 GPUs joined by NVLink

   or everything in one go, within GPU_CHECK_BUDGET seconds (default 560):

   bash scripts/gpu-check.sh --on-device

   The table is printed at the end and written to \$OUT/gpu-check/table.txt (OUT defaults to
   /tmp/gpu-check-out).
EOF
}

# ----- on the device -------------------------------------------------------------------------------

on_device() {
    local sections=${1:-memset,uts,contains,fib,custom,faults,sanitizer}
    local budget=${GPU_CHECK_BUDGET:-560}
    local memset_n=${GPU_CHECK_MEMSET_TASKS:-67108864}
    OUT=${OUT:-/tmp/gpu-check-out}
    LOGS=$OUT/gpu-check
    mkdir -p "$LOGS"
    TABLE=$LOGS/table.txt
    : > "$TABLE.rows"
    if [ ! -f "$CARRY/mgws" ]; then
        echo "error: $CARRY/mgws is missing: run scripts/gpu-check.sh here first and carry $CARRY" >&2
        exit 1
    fi
    BIN=/tmp/mgws-gpu-check
    cp "$CARRY/mgws" "$BIN" && chmod +x "$BIN"
    gunzip -c "$CARRY/$PTX_NAME.gz" > "/tmp/$PTX_NAME"
    gunzip -c "$CARRY/$NVSHMEM_PTX_NAME.gz" > "/tmp/$NVSHMEM_PTX_NAME"
    export MGWS_PTX=/tmp/$PTX_NAME MGWS_NVSHMEM_PTX=/tmp/$NVSHMEM_PTX_NAME
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
    {
        echo "commit: $(cat $CARRY/COMMIT 2>/dev/null)"
        nvidia-smi 2>&1
        nvidia-smi topo -m 2>&1
        ldd "$BIN" 2>&1
    } > "$LOGS/machine.txt"
    echo "gpu-check on ${GPUS}x ${gpu:-unknown GPU}, commit $(cut -c1-12 $CARRY/COMMIT 2>/dev/null), sections $sections" >&2
    if ! ldd "$BIN" | grep -q "not found"; then :; else
        echo "error: the binary lacks libraries here:" >&2; ldd "$BIN" >&2
    fi

    SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    local corpus=$CARRY/data/wiki-en.jsonl
    local G=(--device cuda)
    IFS=',' read -ra want <<< "$sections"
    for section in "${want[@]}"; do
        case "$section" in
        memset)
            local M=(run memset --tasks "$memset_n")
            case_run memset-global-32 120 "${M[@]}" "${G[@]}" --baselines static
            case_run memset-host 180 "${M[@]}" "${G[@]}" --placement host
            case_run memset-host-tasks-in-host 180 "${M[@]}" "${G[@]}" --placement host --tasks-in host
            case_run memset-tree 120 "${M[@]}" "${G[@]}" --termination tree
            case_run memset-hierarchical 120 "${M[@]}" "${G[@]}" --termination hierarchical
            case_run memset-cpu-workers 120 "${M[@]}" "${G[@]}" --cpu-workers 8 --bridge-policy always
            case_run memset-two-atomics 120 "${M[@]}" "${G[@]}" --overflow two-atomics
            case_run memset-tree-two-atomics 120 "${M[@]}" "${G[@]}" --termination tree --overflow two-atomics
            # GPU runs share queues by two unless told otherwise: check the unshared entry too.
            case_run memset-sharing-1 120 "${M[@]}" "${G[@]}" --queue-sharing 1
            case_run memset-sharing-4 120 "${M[@]}" "${G[@]}" --queue-sharing 4
            case_run memset-lanes-128 120 "${M[@]}" "${G[@]}" --lanes 128 --baselines static
            case_run memset-lanes-512 120 "${M[@]}" "${G[@]}" --lanes 512 --baselines static
            case_run memset-tasks-in-host 120 "${M[@]}" "${G[@]}" --tasks-in host
            # Occupancy: MEMSET's registry caps its kernels at 64 registers (32 blocks of 32
            # threads per SM, no spills); a higher cap lets the JIT take more registers, and fewer
            # blocks fit. Same cap for the static baseline.
            case_run memset-maxreg-128 120 "${M[@]}" "${G[@]}" --max-registers 128 --baselines static
            case_run memset-maxreg-255 120 "${M[@]}" "${G[@]}" --max-registers 255 --baselines static
            ;;
        uts)
            for t in T1 T3 T5; do
                case_run "uts-$t" 120 run uts --preset "$t" "${G[@]}" --baselines levels
            done
            case_run uts-T1L 240 run uts --preset T1L "${G[@]}" --baselines levels
            case_run uts-T3-cpu-workers 120 run uts --preset T3 "${G[@]}" --cpu-workers 8 --bridge-policy always --termination hierarchical
            ;;
        contains)
            if [ -f "$corpus" ]; then
                case_run contains-by 120 run contains --corpus "$corpus" --word by "${G[@]}" --baselines static
            else
                skip contains "no corpus carried ($corpus)"
            fi
            # The same documents four times over, longest first (40,132 documents): contiguous
            # shares of very unequal cost, the case stealing is for. Built here from the carried
            # corpus, as scripts/fetch-corpus.sh builds wiki-all-longest-first.jsonl.
            local longest=${TMPDIR:-/tmp}/mgws-wiki-en-x4-longest-first.jsonl
            if [ -f "$corpus" ] && python3 - "$corpus" "$longest" <<'PY'
import json, sys
docs = [l for l in open(sys.argv[1], encoding="utf-8") if l.strip()] * 4
docs.sort(key=lambda l: -len(json.loads(l)["text"].encode("utf-8")))
open(sys.argv[2], "w", encoding="utf-8").writelines(docs)
PY
            then
                case_run contains-longest-first-x4 120 run contains --corpus "$longest" --word by \
                    "${G[@]}" --baselines static
            else
                skip contains-longest-first-x4 "no corpus carried ($corpus) or no python3"
            fi
            # A directory of gzipped documents in their natural order, median 5 KB, largest 440 KB.
            if [ -d "$CARRY/data/manpages-de" ]; then
                case_run contains-manpages-de 120 run contains --corpus "$CARRY/data/manpages-de" \
                    --word zwischen "${G[@]}" --baselines static
            else
                skip contains-manpages-de "no man pages carried ($CARRY/data/manpages-de)"
            fi
            ;;
        fib)
            case_run fib-30 120 run fib -n 30 "${G[@]}" --baselines levels
            ;;
        sweep)
            # Tasks/s against workers (for the plots of docs/results.md): MEMSET 2^26 against the
            # static kernel, UTS T1L and T3 against the kernel-per-level version.
            local M=(run memset --tasks "$memset_n")
            for w in 132 264 528 1056 2112; do
                case_run "sweep-memset-w$w" 60 "${M[@]}" "${G[@]}" --workers "$w" --baselines static
                case_run "sweep-T1L-w$w" 120 run uts --preset T1L "${G[@]}" --workers "$w" --baselines levels
                case_run "sweep-T3-w$w" 60 run uts --preset T3 "${G[@]}" --workers "$w" --baselines levels
            done
            ;;
        gpu-bench)
            # `mgws bench gpu` (mgws, the lean static kernel, kernel-per-level and the nvcc-built
            # hand-written reference, over workers per SM) and the SKEW study on the GPU, into
            # $OUT/gpu-bench (CSV, SVG plots, gpu-table.txt). Not in the default list.
            "$BIN" bench gpu "${G[@]}" --reps 2 --workers-per-sm 4,8,16,22,24,32 \
                --out "$OUT/gpu-bench" 2>&1 | tee "$LOGS/gpu-bench.log" | grep -v '^mgws:'
            "$BIN" bench skew "${G[@]}" --k 0,1,2,3,4,5,6 --tasks 262144 --reps 2 \
                --out "$OUT/gpu-bench" 2>&1 | tee "$LOGS/skew-gpu.log" | grep -v '^mgws:'
            ;;
        faults)
            # Never hang, never crash: a task that stalls 3 s under a 500 ms watchdog must end in
            # a hang error with every worker's state; an unknown tag must name the tag.
            local flog="$LOGS/fault-hang.log" frc=0 t0=$SECONDS
            timeout 60 "$BIN" run stall --nanos 3000000000 --watchdog-ms 500 "${G[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -8
            if [ "$frc" = 1 ] && grep -q "watchdog aborted it" "$flog" && grep -q "worker    0" "$flog"; then
                row fault-hang stall PASS - 1 $((SECONDS - t0)) - "watchdog fired; per-worker state reported"
            else
                row fault-hang stall FAIL - - - - "rc=$frc; see fault-hang.log"
            fi
            flog="$LOGS/fault-unknown-tag.log"; frc=0
            timeout 60 "$BIN" run memset --tasks 1000000 --corrupt-tag-of 500000 "${G[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -4
            if [ "$frc" = 1 ] && grep -q "tag 57005" "$flog"; then
                row fault-unknown-tag memset PASS - 1000000 - - "error names tag 57005"
            else
                row fault-unknown-tag memset FAIL - - - - "rc=$frc; see fault-unknown-tag.log"
            fi
            ;;
        custom)
            # A user's own registry and kernel (examples/custom-task): Collatz steps of 1..=2^22.
            local clog="$LOGS/custom-collatz.log" t0=$SECONDS crc=0
            # Its kernel is the one embedded in the binary by the example's build script.
            timeout 120 "$CARRY/custom-task" 4194304 --device cuda > "$clog" 2>&1 || crc=$?
            sed 's/^/    /' "$clog"
            if [ "$crc" = 0 ] && grep -q " 0 of 4194304 slots wrong" "$clog"; then
                row custom-collatz custom-task PASS - 4194304 - - "all slots equal a sequential computation"
            else
                row custom-collatz custom-task FAIL - - - - "rc=$crc; see custom-collatz.log"
            fi
            echo "    rc=$crc wall=$((SECONDS - t0))s"
            # The same program over 2 GPU PE processes (its main serves its PE first).
            clog="$LOGS/custom-collatz-2pe.log"; t0=$SECONDS; crc=0
            timeout 120 "$CARRY/custom-task" 4194304 --device cuda --processes 2 > "$clog" 2>&1 || crc=$?
            sed 's/^/    /' "$clog"
            if [ "$crc" = 0 ] && grep -q "on cuda-processes: .* 0 of 4194304 slots wrong" "$clog"; then
                row custom-collatz-2pe custom-task PASS - 4194304 - - "2 GPU PEs; all slots equal a sequential computation"
            else
                row custom-collatz-2pe custom-task FAIL - - - - "rc=$crc; see custom-collatz-2pe.log"
            fi
            # N-Queens 15 (examples/nqueens) twice: the second process finds the driver's JIT
            # cache warm; each one's wall time is what a user waits.
            for round in 1 2; do
                clog="$LOGS/nqueens-15-$round.log"; crc=0
                local ns0 ns1
                ns0=$(date +%s%N)
                timeout 120 "$CARRY/nqueens" 15 --cuda > "$clog" 2>&1 || crc=$?
                ns1=$(date +%s%N)
                sed 's/^/    /' "$clog"
                if [ "$crc" = 0 ] && grep -q "^15-queens: 2279184 solutions" "$clog"; then
                    row "nqueens-15-$round" nqueens PASS - 2279184 - - \
                        "process wall $(( (ns1 - ns0) / 1000000 )) ms"
                else
                    row "nqueens-15-$round" nqueens FAIL - - - - "rc=$crc; see nqueens-15-$round.log"
                fi
            done
            ;;
        sanitizer)
            if [ -z "$SANITIZER" ]; then
                skip sanitizer "compute-sanitizer not found (no CUDA toolkit on this machine)"
                continue
            fi
            local S=("${G[@]}" --workers 8 --watchdog-ms 600000)
            for tool in memcheck racecheck synccheck; do
                SAN=("$SANITIZER" --tool "$tool" --error-exitcode 99)
                case_run "san-$tool-memset" 180 run memset --tasks 4096 "${S[@]}"
                case_run "san-$tool-uts" 180 run uts "${S[@]}"
                if [ -f "$corpus" ]; then
                    case_run "san-$tool-contains" 180 run contains --corpus "$corpus" --word by --limit 100 "${S[@]}"
                fi
                case_run "san-$tool-fib" 180 run fib -n 12 "${S[@]}"
                # The kernel-per-level baseline, whose entries keep their environment in a
                # local array.
                case_run "san-$tool-uts-levels" 180 run uts "${S[@]}" --method levels
                case_run "san-$tool-uts-cpu-workers" 180 run uts "${S[@]}" --cpu-workers 2 --bridge-policy always
                SAN=()
            done
            ;;
        pes)
            # One process per GPU over NVSHMEM against one process driving the same GPUs. With
            # one GPU both PEs share it (their kernels take turns in time slices): a check of
            # the protocol, not of speed; the smaller sizes keep the section in budget.
            local P=("${G[@]}" --processes 2) ONE=("${G[@]}")
            # Several PEs per GPU: 3 on one GPU; on two, 4 (NVSHMEM joins PEs that share GPUs
            # only evenly, and 3 PEs on 2 GPUs are refused before any PE starts).
            local pm=16777216 pf=30 shared=3
            if [ "$GPUS" -ge 2 ]; then
                P+=(--devices 0,1); ONE+=(--devices 0,1); pm=134217728; pf=34; shared=4
            fi
            case_run pes-memset-1proc 180 run memset --tasks "$pm" "${ONE[@]}" --termination hierarchical
            for t in hierarchical counter tree; do
                case_run "pes-memset-2pe-$t" 180 run memset --tasks "$pm" "${P[@]}" --termination "$t"
            done
            case_run pes-T1L-1proc 240 run uts --preset T1L "${ONE[@]}" --termination hierarchical
            case_run pes-T1L-2pe 240 run uts --preset T1L "${P[@]}"
            case_run pes-fib-1proc 120 run fib -n "$pf" "${ONE[@]}" --termination hierarchical
            case_run pes-fib-2pe 120 run fib -n "$pf" "${P[@]}"
            case_run pes-T3-2pe 120 run uts --preset T3 "${P[@]}"
            case_run "pes-memset-${shared}pe" 120 run memset --tasks 1048576 "${G[@]}" --processes "$shared"
            local flog="$LOGS/pes-fault-hang.log" frc=0 t0=$SECONDS
            timeout 60 "$BIN" run stall --nanos 3000000000 --watchdog-ms 500 "${P[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -8
            if [ "$frc" = 1 ] && grep -q "watchdog aborted it" "$flog" && grep -q "worker    0" "$flog"; then
                row pes-fault-hang stall PASS - 1 $((SECONDS - t0)) - "watchdog fired; per-worker state reported"
            else
                row pes-fault-hang stall FAIL - - - - "rc=$frc; see pes-fault-hang.log"
            fi
            flog="$LOGS/pes-fault-unknown-tag.log"; frc=0
            timeout 60 "$BIN" run memset --tasks 1000000 --corrupt-tag-of 500000 "${P[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -4
            if [ "$frc" = 1 ] && grep -q "tag 57005" "$flog"; then
                row pes-fault-unknown-tag memset PASS - 1000000 - - "error names tag 57005"
            else
                row pes-fault-unknown-tag memset FAIL - - - - "rc=$frc; see pes-fault-unknown-tag.log"
            fi
            pe_sanitizer_cases pes case_run "${P[@]}"
            ;;
        pes-api)
            # GPU PEs over NVSHMEM's device API (--pe-transport device-api: the kernel of `cargo
            # xtask ptx --nvshmem`, linked at start-up with NVRTC-compiled wrappers), against the
            # mapped transport and one process driving the same GPUs, in the same call.
            local P=("${G[@]}" --processes 2) A=("${G[@]}" --processes 2 --pe-transport device-api)
            local ONE=("${G[@]}") pm=16777216 pf=30
            if [ "$GPUS" -ge 2 ]; then
                P+=(--devices 0,1); A+=(--devices 0,1); ONE+=(--devices 0,1); pm=134217728; pf=34
            fi
            case_run pes-api-fib20 60 run fib -n 20 "${A[@]}"
            case_run pes-api-memset-1proc 180 run memset --tasks "$pm" "${ONE[@]}" --termination hierarchical
            case_run pes-api-memset-mapped 180 run memset --tasks "$pm" "${P[@]}"
            for t in hierarchical counter tree; do
                case_run "pes-api-memset-$t" 180 run memset --tasks "$pm" "${A[@]}" --termination "$t"
            done
            case_run pes-api-T1L-1proc 240 run uts --preset T1L "${ONE[@]}" --termination hierarchical
            case_run pes-api-T1L-mapped 240 run uts --preset T1L "${P[@]}"
            case_run pes-api-T1L 240 run uts --preset T1L "${A[@]}"
            case_run pes-api-fib-1proc 120 run fib -n "$pf" "${ONE[@]}" --termination hierarchical
            case_run pes-api-fib-mapped 120 run fib -n "$pf" "${P[@]}"
            case_run pes-api-fib 120 run fib -n "$pf" "${A[@]}"
            case_run pes-api-T3 120 run uts --preset T3 "${A[@]}"
            # Every PE's words through NVSHMEM's calls, as PEs of other nodes are reached (on
            # one node NVSHMEM maps the PEs, and the kernel reaches those directly).
            export MGWS_NVSHMEM_CALLS_ONLY=1
            case_run pes-api-calls-memset 180 run memset --tasks "$pm" "${A[@]}"
            case_run pes-api-calls-T1L 240 run uts --preset T1L "${A[@]}"
            case_run pes-api-calls-fib 120 run fib -n "$pf" "${A[@]}"
            case_run pes-api-calls-T3 120 run uts --preset T3 "${A[@]}"
            unset MGWS_NVSHMEM_CALLS_ONLY
            local flog="$LOGS/pes-api-fault-hang.log" frc=0 t0=$SECONDS
            timeout 60 "$BIN" run stall --nanos 3000000000 --watchdog-ms 500 "${A[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -8
            if [ "$frc" = 1 ] && grep -q "watchdog aborted it" "$flog" && grep -q "worker    0" "$flog"; then
                row pes-api-fault-hang stall PASS - 1 $((SECONDS - t0)) - "watchdog fired; per-worker state reported"
            else
                row pes-api-fault-hang stall FAIL - - - - "rc=$frc; see pes-api-fault-hang.log"
            fi
            flog="$LOGS/pes-api-fault-unknown-tag.log"; frc=0
            timeout 60 "$BIN" run memset --tasks 1000000 --corrupt-tag-of 500000 "${A[@]}" > "$flog" 2>&1 || frc=$?
            sed 's/^/    /' "$flog" | head -4
            if [ "$frc" = 1 ] && grep -q "tag 57005" "$flog"; then
                row pes-api-fault-unknown-tag memset PASS - 1000000 - - "error names tag 57005"
            else
                row pes-api-fault-unknown-tag memset FAIL - - - - "rc=$frc; see pes-api-fault-unknown-tag.log"
            fi
            pe_sanitizer_cases pes-api case_run "${A[@]}"
            if [ -n "$SANITIZER" ]; then
                export MGWS_NVSHMEM_CALLS_ONLY=1
                for tool in memcheck racecheck; do
                    SAN=("$SANITIZER" --tool "$tool" --target-processes all --error-exitcode 99)
                    case_run "pes-api-calls-san-$tool-fib" 180 run fib -n 12 "${A[@]}" --workers 16 --watchdog-ms 600000
                    SAN=()
                done
                unset MGWS_NVSHMEM_CALLS_ONLY
            fi
            ;;
        nodes)
            if [ "$GPUS" -lt 2 ]; then
                skip nodes "needs 2 GPUs, this machine has $GPUS"
                continue
            fi
            # On one machine, as the launcher of a one-node run sets them (a run across nodes
            # leaves them to NVSHMEM's defaults or the environment).
            export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NVSHMEM_REMOTE_TRANSPORT=none
            local A=("${G[@]}" --processes 2 --pe-transport device-api)
            nodes_case nodes-fib20 60 run fib -n 20 "${A[@]}"
            case_run nodes-memset-1launcher 180 run memset --tasks 134217728 "${A[@]}" --devices 0,1
            nodes_case nodes-memset 180 run memset --tasks 134217728 "${A[@]}"
            case_run nodes-T1L-1launcher 240 run uts --preset T1L "${A[@]}" --devices 0,1
            nodes_case nodes-T1L 240 run uts --preset T1L "${A[@]}"
            case_run nodes-fib-1launcher 120 run fib -n 34 "${A[@]}" --devices 0,1
            nodes_case nodes-fib 120 run fib -n 34 "${A[@]}"
            nodes_case nodes-T3 120 run uts --preset T3 "${A[@]}"
            # Two PEs a node (sharing the node's GPU), victims ordered by PE, then node.
            nodes_case nodes-T1L-4pe-bias 240 run uts --preset T1L "${G[@]}" --processes 4 --pe-transport device-api --same-device-bias 0.5
            export MGWS_NVSHMEM_CALLS_ONLY=1
            nodes_case nodes-calls-memset 180 run memset --tasks 134217728 "${A[@]}"
            nodes_case nodes-calls-T1L 240 run uts --preset T1L "${A[@]}"
            unset MGWS_NVSHMEM_CALLS_ONLY
            pe_sanitizer_cases nodes nodes_case "${A[@]}"
            # A hang across the nodes: node 0's watchdog fires with every worker's state (node
            # 1's from its records), and node 1 ends with node 0's error.
            local port=$(( 20000 + RANDOM % 20000 )) t0=$SECONDS
            local flog="$LOGS/nodes-fault-hang.log" f1log="$LOGS/nodes-fault-hang-node1.log"
            local S=(run stall --nanos 3000000000 --watchdog-ms 500 "${A[@]}" --nodes 2 --coordinator "127.0.0.1:$port")
            ( timeout 60 "$BIN" "${S[@]}" --node-rank 1 --devices 1 > "$f1log" 2>&1; echo "rc=$?" >> "$f1log" ) &
            local n1=$! frc=0
            timeout 60 "$BIN" "${S[@]}" --node-rank 0 --devices 0 > "$flog" 2>&1 || frc=$?
            wait "$n1"
            sed 's/^/    /' "$flog" | head -8
            if [ "$frc" = 1 ] && grep -q "watchdog aborted it" "$flog" && grep -q "worker    0" "$flog" \
                && grep -q "^rc=1" "$f1log" && grep -q "node 0: the run stopped making progress" "$f1log"; then
                row nodes-fault-hang stall PASS - 1 $((SECONDS - t0)) - "watchdog on node 0; node 1 got its error"
            else
                row nodes-fault-hang stall FAIL - - - - "rc=$frc; see nodes-fault-hang*.log"
            fi
            unset NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME NVSHMEM_REMOTE_TRANSPORT
            ;;
        nodes-mpirun)
            if [ "$GPUS" -lt 2 ] || ! command -v mpirun > /dev/null; then
                skip nodes-mpirun "needs 2 GPUs and mpirun"
                continue
            fi
            export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NVSHMEM_REMOTE_TRANSPORT=none
            local A=("${G[@]}" --processes 2 --pe-transport device-api)
            mpirun --version 2>&1 | head -1 > "$LOGS/mpirun-version.txt"
            mpirun_case nodes-mpirun-fib20 60 run fib -n 20 "${A[@]}"
            mpirun_case nodes-mpirun-memset 180 run memset --tasks 134217728 "${A[@]}"
            mpirun_case nodes-mpirun-T1L 240 run uts --preset T1L "${A[@]}"
            mpirun_case nodes-mpirun-fib 120 run fib -n 34 "${A[@]}"
            unset NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME NVSHMEM_REMOTE_TRANSPORT
            ;;
        multi)
            if [ "$GPUS" -lt 2 ]; then
                skip multi "needs 2 GPUs, this machine has $GPUS"
                continue
            fi
            # Issue targets, as ratios to 1 GPU from the same call: MEMSET 2^27, UTS T1L, FIB(34),
            # the ~4M-node UTS trees, a small CONTAINS; every termination mode on 2 GPUs; remote
            # placement against global; same-device victim bias.
            local M2=(run memset --tasks 134217728 "${G[@]}")
            case_run multi-memset-1gpu 180 "${M2[@]}"
            case_run multi-memset-1gpu-hier 180 "${M2[@]}" --termination hierarchical
            for t in counter tree hierarchical; do
                case_run "multi-memset-2gpu-$t" 180 "${M2[@]}" --devices 0,1 --termination "$t"
            done
            case_run multi-memset-2gpu-hier-bias 180 "${M2[@]}" --devices 0,1 --termination hierarchical --same-device-bias 0.9
            case_run multi-memset-1gpu-remote 180 "${M2[@]}" --placement remote
            case_run multi-memset-2gpu-remote 180 "${M2[@]}" --devices 0,1 --placement remote --termination hierarchical
            case_run multi-T1L-1gpu 240 run uts --preset T1L "${G[@]}"
            for t in counter tree hierarchical; do
                case_run "multi-T1L-2gpu-$t" 240 run uts --preset T1L "${G[@]}" --devices 0,1 --termination "$t"
            done
            case_run multi-T1L-2gpu-hier-bias 240 run uts --preset T1L "${G[@]}" --devices 0,1 --termination hierarchical --same-device-bias 0.9
            case_run multi-fib34-1gpu 120 run fib -n 34 "${G[@]}"
            for t in counter hierarchical; do
                case_run "multi-fib34-2gpu-$t" 120 run fib -n 34 "${G[@]}" --devices 0,1 --termination "$t"
            done
            for p in T1 T3 T5; do
                case_run "multi-$p-1gpu" 120 run uts --preset "$p" "${G[@]}"
                for t in counter hierarchical; do
                    case_run "multi-$p-2gpu-$t" 120 run uts --preset "$p" "${G[@]}" --devices 0,1 --termination "$t"
                done
            done
            if [ -f "$corpus" ]; then
                case_run multi-contains-1gpu 120 run contains --corpus "$corpus" --word by --limit 2000 "${G[@]}"
                case_run multi-contains-2gpu 120 run contains --corpus "$corpus" --word by --limit 2000 "${G[@]}" --devices 0,1 --termination hierarchical
            fi
            if [ -n "$SANITIZER" ]; then
                for tool in memcheck racecheck; do
                    SAN=("$SANITIZER" --tool "$tool" --error-exitcode 99)
                    case_run "multi-san-$tool-memset" 180 run memset --tasks 4096 "${G[@]}" --workers 16 --devices 0,1 --termination hierarchical --watchdog-ms 600000
                    SAN=()
                done
            fi
            ;;
        bench-multi)
            # `mgws bench multi`: every workload on 1, 2, 4 GPUs (as many as this machine has), in
            # one process and as PEs, into $OUT/bench-multi (table, CSV, SVG); then
            # compute-sanitizer on every GPU with the data layouts (partitioned slots and split
            # initial tasks, rows per worker, replicated slots) and over one PE per GPU.
            if [ "$GPUS" -lt 2 ]; then
                skip bench-multi "needs 2 GPUs, this machine has $GPUS"
                continue
            fi
            local counts=1 all=0
            [ "$GPUS" -ge 2 ] && counts=1,2
            [ "$GPUS" -ge 4 ] && counts=1,2,4
            all=$(seq -s, 0 $(( ${counts##*,} - 1 )))
            "$BIN" bench multi "${G[@]}" --gpus "$counts" --reps 1 --termination hierarchical \
                --out "$OUT/bench-multi" 2>&1 | tee "$LOGS/bench-multi.log" | grep -v '^mgws:'
            if [ -n "$SANITIZER" ]; then
                for tool in memcheck racecheck; do
                    SAN=("$SANITIZER" --tool "$tool" --error-exitcode 99)
                    local S=("${G[@]}" --devices "$all" --workers 32 --watchdog-ms 600000)
                    case_run "bench-multi-san-$tool-memset" 180 run memset --tasks 200000 "${S[@]}"
                    case_run "bench-multi-san-$tool-memset-repl" 180 run memset --tasks 200000 "${S[@]}" --area-layout replicated-add
                    case_run "bench-multi-san-$tool-fib" 180 run fib -n 16 "${S[@]}"
                    SAN=()
                done
                pe_sanitizer_cases bench-multi-pes case_run "${G[@]}" --processes "${counts##*,}" --devices "$all"
            fi
            ;;
        *)
            echo "unknown section $section" >&2
            ;;
        esac
    done
    print_table "$gpu" | tee "$TABLE"
}

SAN=()

# row CASE KERNEL RESULT WORKERS TASKS SECONDS RATE NOTES
row() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$TABLE.rows"
}

skip() {
    row "$1" - SKIP - - - - "$2"
}

# case_limit NAME LIMIT: the seconds case NAME may take, LIMIT or what is left of the budget; a
# case with less than 15 s left is recorded as skipped, and case_limit fails.
case_limit() {
    local left=$(( ${GPU_CHECK_BUDGET:-560} - SECONDS ))
    if [ "$left" -lt 15 ]; then
        skip "$1" "time budget used up (rerun this section alone)"
        return 1
    fi
    echo $(( $2 < left ? $2 : left ))
}

# case_run NAME TIMEOUT ARGS...: runs the binary (under $SAN if set), logs to $LOGS/NAME.log and
# adds one table row per outcome it printed (the run and its baselines).
case_run() {
    local name=$1 limit=$2
    shift 2
    limit=$(case_limit "$name" "$limit") || return
    local log=$LOGS/$name.log
    echo "+ [${SECONDS}s] $name: ${SAN[*]} mgws $*" >&2
    local t0=$SECONDS
    { echo "+ ${SAN[*]} $BIN $*"; timeout -k 10 "$limit" "${SAN[@]}" "$BIN" "$@"; } > "$log" 2>&1
    local rc=$?
    local wall=$(( SECONDS - t0 ))
    echo "rc=$rc wall=${wall}s" >> "$log"
    # Outcome lines: "<workload> on <backend> backend: W workers x L lanes, N tasks in T s = R tasks/s"
    # each followed (a few lines later) by "verified: yes|NO (...)".
    local rows
    rows=$(awk -v name="$name" -v rc="$rc" -v wall="$wall" '
        / backend: [0-9]+ workers x [0-9]+ lanes, / {
            backend = $3; workers = $5; lanes = $8; tasks = $10; secs = $13; rate = $16
            setup = ""
            if (match($0, /set-up before it [0-9.]+ s/)) setup = "set-up " substr($0, RSTART + 17, RLENGTH - 19) " s"
            have = 1; next
        }
        /^verified: / && have {
            v = ($2 == "yes") ? "PASS" : "FAIL"
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, backend, v, workers "x" lanes, tasks, secs, rate, setup
            have = 0
        }' "$log")
    local note=""
    if [ ${#SAN[@]} -gt 0 ]; then
        note=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | sed 's/^=* *//')
    fi
    if [ -n "$rows" ]; then
        local errs
        errs=$(grep -E "^mgws: (error|baseline)" "$log" | head -3 | tr '\n' ' ' | cut -c1-160)
        while IFS= read -r row; do
            # The set-up (last field) goes into the notes unless a sanitizer's summary does.
            local setup=${row##*$'\t'}
            printf '%s\t%s\n' "${row%$'\t'*}" "${note:-$setup}" >> "$TABLE.rows"
        done <<< "$rows"
        [ -n "$errs" ] && row "$name" - NOTE - - - - "$errs"
        if [ ${#SAN[@]} -gt 0 ] && { [ "$rc" = 99 ] || ! grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors" "$log"; }; then
            row "$name" sanitizer FAIL - - - - "rc=$rc ${note:-no error summary; see $name.log}"
        fi
    else
        local why
        why=$(grep -E "mgws: error|ERROR SUMMARY|panicked" "$log" | head -2 | tr '\n' ' ' | cut -c1-200)
        [ "$rc" = 124 ] && why="timed out after ${limit}s (killed); $why"
        row "$name" - ERROR - - - - "rc=$rc ${why:-see $name.log}"
    fi
    tail -n 3 "$log" | sed 's/^/    /' >&2
}

# pe_sanitizer_cases PREFIX RUNNER ARGS...: compute-sanitizer memcheck and racecheck on every PE
# (--target-processes all) of a small MEMSET and FIB(12) with ARGS, each case run by RUNNER
# (case_run, or nodes_case for a run across nodes) as PREFIX-san-TOOL-WORKLOAD.
pe_sanitizer_cases() {
    local prefix=$1 runner=$2 tool
    shift 2
    [ -n "$SANITIZER" ] || return 0
    for tool in memcheck racecheck; do
        SAN=("$SANITIZER" --tool "$tool" --target-processes all --error-exitcode 99)
        "$runner" "$prefix-san-$tool-memset" 180 run memset --tasks 4096 "$@" --workers 16 --watchdog-ms 600000
        "$runner" "$prefix-san-$tool-fib" 180 run fib -n 12 "$@" --workers 16 --watchdog-ms 600000
        SAN=()
    done
}

# A run across 2 nodes on one machine: node 1's launcher (its PE on GPU 1) in the background,
# node 0's (its PE on GPU 0) through case_run; node 1 must report the same verified run.
nodes_case() {
    local name=$1 limit=$2
    shift 2
    # Node 1's launcher within the budget too: a node 0 ended by its limit leaves node 1 to wait.
    limit=$(case_limit "$name" "$limit") || return
    local port=$(( 20000 + RANDOM % 20000 ))
    local n1log=$LOGS/$name-node1.log
    local across=(--nodes 2 --coordinator "127.0.0.1:$port")
    ( timeout -k 10 "$limit" "${SAN[@]}" "$BIN" "$@" "${across[@]}" --node-rank 1 --devices 1 > "$n1log" 2>&1
      echo "rc=$?" >> "$n1log" ) &
    local n1=$!
    case_run "$name" "$limit" "$@" "${across[@]}" --node-rank 0 --devices 0
    wait "$n1"
    local clean=1
    if [ ${#SAN[@]} -gt 0 ] && ! grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors" "$n1log"; then
        clean=0
    fi
    if [ "$clean" = 1 ] && grep -q "^verified: yes" "$n1log" && grep -q "^rc=0" "$n1log"; then
        row "$name-node1" - PASS - - - - "node 1 reports the same verified run"
    else
        row "$name-node1" - FAIL - - - - "$(grep -m1 'mgws: error' "$n1log" | cut -c1-160) see $name-node1.log"
    fi
}

# A run across 2 nodes whose launchers mpirun starts (ranks 0 and 1 from OMPI_COMM_WORLD_RANK,
# one app context per GPU); both ranks must print the same verified run.
mpirun_case() {
    local name=$1 limit=$2
    shift 2
    limit=$(case_limit "$name" "$limit") || return
    local port=$(( 20000 + RANDOM % 20000 )) log=$LOGS/$name.log t0=$SECONDS
    local across=(--nodes 2 --coordinator "127.0.0.1:$port")
    local M=(mpirun --allow-run-as-root --oversubscribe -x MGWS_PTX -x MGWS_NVSHMEM_PTX
        -x NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME -x NVSHMEM_REMOTE_TRANSPORT)
    echo "+ [${SECONDS}s] $name: ${M[*]} -np 1 mgws $* --devices 0 : -np 1 mgws $* --devices 1" >&2
    { echo "+ ${M[*]} -np 1 $BIN $* ${across[*]} --devices 0 : -np 1 $BIN $* ${across[*]} --devices 1"
      timeout -k 10 "$limit" "${M[@]}" -np 1 "$BIN" "$@" "${across[@]}" --devices 0 \
          : -np 1 "$BIN" "$@" "${across[@]}" --devices 1; } > "$log" 2>&1
    local rc=$?
    local verified line
    verified=$(grep -c "^verified: yes" "$log")
    line=$(grep -m1 " backend: [0-9]* workers x " "$log")
    if [ "$rc" = 0 ] && [ "$verified" = 2 ]; then
        # "<workload> on <backend> backend: W workers x L lanes, N tasks in T s = R tasks/s"
        set -- $line
        row "$name" "$3" PASS "$5x$8" "${10}" "${13}" "${16}" "both ranks verified ($((SECONDS - t0)) s)"
    else
        row "$name" - FAIL - - - - "rc=$rc, $verified of 2 ranks verified; see $name.log"
    fi
    tail -n 3 "$log" | sed 's/^/    /' >&2
}

print_table() {
    echo
    echo "== gpu-check: ${1:-unknown GPU} x${GPUS}, commit $(cut -c1-12 $CARRY/COMMIT 2>/dev/null), $(date -u +%FT%TZ), ${SECONDS}s"
    {
        printf 'case\tkernel\tresult\tworkers\ttasks\tseconds\ttasks/s\tnotes\n'
        cat "$TABLE.rows"
    } | awk -F'\t' '{
        for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i] && i < 8) w[i] = length($i) }
        n[NR] = NF; rows = NR
    } END {
        for (r = 1; r <= rows; r++) {
            line = ""
            for (i = 1; i <= n[r]; i++) line = line sprintf(i < 8 ? "%-" w[i] "s  " : "%s", cell[r, i])
            print line
        }
    }'
    local pass fail
    pass=$(grep -c $'\tPASS\t' "$TABLE.rows")
    fail=$(grep -cE $'\t(FAIL|ERROR)\t' "$TABLE.rows")
    echo "$pass passed, $fail failed"
}

case "${1:-}" in
    --on-device) on_device "${2:-}" ;;
    ""|--build) build_here ;;
    -h|--help) sed -n '2,33p' "$0" ;;
    *) echo "usage: $0 [--on-device [SECTIONS]]" >&2; exit 2 ;;
esac
