#!/usr/bin/env bash
# Session 24, call C (2 H200s): initial claims kept on the own GPU until its ranges are all
# claimed (new) against 4fcab64 (old), alternating, two rounds; memcheck of the new on 2 GPUs.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws $C/old/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/new.ptx
gunzip -c $C/old/mgws_kernel.sm_90.ptx.gz > /tmp/old.ptx
L=$OUT/callC.txt
echo "new $(cat $C/COMMIT) old $(cat $C/old/COMMIT)" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, sys, time
C = ".device-carry"
BIN = {"old": (C + "/old/mgws", "/tmp/old.ptx"), "new": (C + "/mgws", "/tmp/new.ptx")}
def run(v, label, args, reps=3):
    b, ptx = BIN[v]
    env = dict(os.environ, MGWS_LOG="mgws=debug", MGWS_PTX=ptx)
    p = subprocess.run([b, "run"] + args + ["--device", "cuda", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    ok, gpu_t, stats = None, [], None
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line); ok = j.get("verified"); stats = j.get("stats")
        elif "a GPU's kernel time" in line:
            gpu_t.append(float(line.split("kernel_s=")[-1].strip()[:10]))
    if ok is None:
        print("%s %-36s FAILED\n%s" % (v, label, out[-1500:]), flush=True); return
    ngpu = 2 if "0,1" in args else 1
    runs = [max(gpu_t[i:i + ngpu]) for i in range(0, len(gpu_t), ngpu)]
    print("%s %-36s verified=%s ms %s  steal_attempts %s" % (v, label, ok, " ".join("%.3f" % (1e3 * r) for r in runs), stats and stats.get("steal_attempts")), flush=True)
M = lambda n: ["memset", "--tasks", str(n)]
for rnd in (1, 2):
    for v in ("old", "new"):
        for d in ("0", "0,1"):
            run(v, "memset 2^28 d=%s" % d, M(1 << 28) + ["--devices", d], reps=5)
        run(v, "memset 2^26 d=0,1", M(1 << 26) + ["--devices", "0,1"], reps=5)
        run(v, "memset 2^29-1 d=0,1", M((1 << 29) - 1) + ["--devices", "0,1"], reps=3)
        for d in ("0", "0,1"):
            run(v, "skew 2^20 k2 b12 d=%s" % d, ["skew", "--tasks", str(1 << 20), "--k", "2", "--bits", "12", "--devices", d])
        run(v, "fib 44 d=0,1", ["fib", "-n", "44", "--devices", "0,1"])
PY
python3 /tmp/drive.py 2>&1 | tee -a $L
for v in old new; do
  if [ $v = old ]; then B=$C/old/mgws; P=/tmp/old.ptx; else B=$C/mgws; P=/tmp/new.ptx; fi
  echo "== $v bench multi contains" | tee -a $L
  MGWS_PTX=$P timeout 120 $B bench multi --workloads contains,memset --gpus 1,2 --modes process --reps 2 --termination hierarchical --out $OUT/bm-$v 2>&1 | grep -E "^(contains|memset) " | tee -a $L
done
echo "== sanitizer at ${SECONDS}s" | tee -a $L
export MGWS_PTX=/tmp/new.ptx
S=(--device cuda --termination hierarchical --devices 0,1 --workers 32 --watchdog-ms 600000)
for tool in memcheck racecheck; do
  for w in "memset --tasks 200000" "skew --tasks 4096 --k 2 --bits 8"; do
    echo "== $tool 2 GPUs: $w" | tee -a $L
    timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 99 $C/mgws run $w "${S[@]}" > /tmp/san.txt 2>&1; echo "rc=$?" | tee -a $L
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verified|error" /tmp/san.txt | head -4 | tee -a $L
  done
done
echo "== done at ${SECONDS}s" | tee -a $L
