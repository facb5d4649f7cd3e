#!/usr/bin/env bash
# Session 31, call G (2 H200s): UTS at the plain-slot rates on 1 and 2 GPUs (T1L, T2L, T3L,
# `mgws run --repeat 3`, two rounds), then gpu-check multi, pes and pes-api at the new kernel.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
gunzip -c $C/var/custom-task.gz > $C/custom-task; chmod +x $C/custom-task
gunzip -c $C/var/nqueens-new.gz > $C/nqueens; chmod +x $C/nqueens
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/k.ptx
export MGWS_PTX=/tmp/k.ptx
L=$OUT/callG.txt
echo "binary $(cat $C/COMMIT)" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, statistics as st
def run(label, args, reps):
    env = dict(os.environ, MGWS_LOG="mgws=debug")
    p = subprocess.run([".device-carry/mgws", "run"] + args + ["--device", "cuda", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    js = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if not js or p.returncode != 0:
        print("%-26s FAILED rc=%d\n%s" % (label, p.returncode, out[-1500:]), flush=True); return
    t = [j["elapsed_s"] for j in js]
    print("%-26s ok=%s med %10.1f us | %s" % (label, all(j["verified"] for j in js), st.median(t) * 1e6, " ".join("%.1f" % (1e6 * x) for x in t)), flush=True)
for rnd in (1, 2):
    for p in ("T1L", "T2L", "T3L"):
        for dev in ("0", "0,1"):
            run("%s [%s]" % (p, dev), ["uts", "--preset", p, "--devices", dev], 3)
PY
timeout 200 python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== gpu-check multi,pes,pes-api at ${SECONDS}s" | tee -a $L
GPU_CHECK_BUDGET=420 bash scripts/gpu-check.sh --on-device multi,pes,pes-api 2>&1 | tail -80 | tee -a $L
cd $OUT && tar czf gpu-check.tgz gpu-check && rm -rf gpu-check
echo "== done at ${SECONDS}s" | tee -a $L
