#!/usr/bin/env bash
# Session 24, call A (2 H200s): 1 against 2 GPUs at HEAD, alternating, two rounds; bench multi;
# compute-sanitizer on 2 GPUs in one process.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/new.ptx
export MGWS_PTX=/tmp/new.ptx
B=$C/mgws
L=$OUT/callA.txt
echo "commit $(cat $C/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv | tee -a $L
nvidia-smi topo -m | head -4 | tee -a $L
H=(--device cuda --termination hierarchical)
gp() {
  local d=$1; shift
  echo "== devices $d: $*"
  timeout 120 $B run "$@" "${H[@]}" --devices $d 2>&1 | grep -E "tasks/s|nodes/s|error|verif" | sed 's/ (set-up.*//'
}
{
$B run fib -n 20 "${H[@]}" --devices 0,1 > /dev/null 2>&1   # warm the kernel cache
echo "warm at ${SECONDS}s"
for r in 1 2; do
  for d in 0 0,1; do gp $d memset --tasks 268435456 --repeat 5; done
  for d in 0 0,1; do gp $d fib -n 44 --repeat 3; done
  for d in 0 0,1; do gp $d uts --preset T2L --repeat 3; done
  for d in 0 0,1; do gp $d uts --preset T3L --repeat 3; done
done
for d in 0 0,1; do gp $d uts --preset T1L --repeat 3; done
for d in 0 0,1; do gp $d uts --preset T1L --depth 15 --repeat 2; done
echo "== bench multi at ${SECONDS}s"
timeout 260 $B bench multi "${H[@]:2}" --gpus 1,2 --modes process,pes --reps 2 --out $OUT/bench-multi 2>&1 | grep -v '^mgws:\|INFO' | tail -40
echo "== sanitizer at ${SECONDS}s"
S=(--device cuda --termination hierarchical --devices 0,1 --workers 32 --watchdog-ms 600000)
for tool in memcheck racecheck; do
  for w in "memset --tasks 200000" "memset --tasks 200000 --area-layout replicated-add" "fib -n 16"; do
    [ $SECONDS -gt 530 ] && { echo "skip $tool $w (budget)"; continue; }
    echo "== $tool 2 GPUs: $w"
    timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 99 $B run $w "${S[@]}" > /tmp/san.txt 2>&1; echo "rc=$?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verified|error" /tmp/san.txt | head -4
  done
done
echo "== done at ${SECONDS}s"
} 2>&1 | tee -a $L
