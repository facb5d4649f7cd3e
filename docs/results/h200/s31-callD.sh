#!/usr/bin/env bash
# Session 31, call D (one H200): the instruction mix of N-Queens 15 and FIB(40) per opcode (ncu),
# and the SASS of each worker entry with executed counts per instruction (for where a batch's
# instructions go).
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws $C/nqueens
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/k.ptx
export MGWS_PTX=/tmp/k.ptx MGWS_LAUNCH_GATE=off
L=$OUT/callD.txt
echo "binary $(cat $C/COMMIT)" | tee $L
NCU=/usr/local/cuda/bin/ncu
for w in nqueens fib; do
  if [ $w = nqueens ]; then cmd="$C/nqueens 15 --cuda"; else cmd="$C/mgws run fib -n 40 --device cuda --devices 0"; fi
  echo "== $w opcodes at ${SECONDS}s" | tee -a $L
  timeout 120 $NCU -k regex:worker --launch-count 1 --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum --print-metric-instances values $cmd > $OUT/$w-opcodes.txt 2>&1; echo "rc=$?" | tee -a $L
  grep -E "sass__inst_executed_per_opcode|smsp__inst_executed.sum|smsp__thread_inst" $OUT/$w-opcodes.txt | cut -c1-3000 | tee -a $L
  echo "== $w sass at ${SECONDS}s" | tee -a $L
  timeout 150 $NCU -k regex:worker --launch-count 1 --section SourceCounters --page source --print-source sass --csv $cmd > $OUT/$w-sass.csv 2>&1; echo "rc=$? $(wc -c < $OUT/$w-sass.csv) bytes" | tee -a $L
  gzip -f $OUT/$w-sass.csv
done
echo "== done at ${SECONDS}s" | tee -a $L
