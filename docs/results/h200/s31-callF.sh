#!/usr/bin/env bash
# Session 31, call F (one H200): `plain_slots` (UTS's registry and N-Queens') against head's
# kernel (58926c7), alternating, two rounds, with the kernel per level; compute-sanitizer on
# N-Queens; then gpu-check's default sections at the new commit.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
for v in head new; do
  gunzip -c $C/var/$v.ptx.gz > /tmp/$v.ptx
  gunzip -c $C/var/nqueens-$v.gz > /tmp/nqueens-$v; chmod +x /tmp/nqueens-$v
done
gunzip -c $C/var/nqueens-new.gz > $C/nqueens; chmod +x $C/nqueens
gunzip -c $C/var/custom-task.gz > $C/custom-task; chmod +x $C/custom-task
L=$OUT/callF.txt
echo "binary $(cat $C/COMMIT)" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, statistics as st
def run(label, v, args, reps):
    env = dict(os.environ, MGWS_LOG="mgws=debug", MGWS_PTX="/tmp/%s.ptx" % v)
    p = subprocess.run([".device-carry/mgws", "run"] + args + ["--device", "cuda", "--devices", "0", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    js = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    t = [float(l.split("kernel_s=")[-1].split()[0]) for l in out.splitlines() if "a GPU's kernel time" in l]
    if not js or p.returncode != 0:
        print("%-30s FAILED rc=%d\n%s" % (label, p.returncode, out[-1500:]), flush=True); return
    if not t:
        t = [j["elapsed_s"] for j in js]
    print("%-30s ok=%s med %10.1f us | %s" % (label, all(j["verified"] for j in js), st.median(t) * 1e6, " ".join("%.1f" % (1e6 * x) for x in t)), flush=True)
def nq(v, n="15"):
    ts = []
    for i in range(5):
        p = subprocess.run(["/tmp/nqueens-" + v, n, "--cuda"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            print("nqueens %s FAILED rc=%d %s" % (v, p.returncode, (p.stdout + p.stderr)[-800:]), flush=True); return
        ts.append(float(p.stdout.split(" in ")[-1].split()[0]))
    print("%-30s ok=True med %10.1f us | %s" % ("nqueens %s %s" % (n, v), st.median(ts) * 1e6, " ".join("%.1f" % (1e6 * x) for x in ts)), flush=True)
W = (("t1l", ["uts", "--preset", "T1L"], 5), ("t1l levels", ["uts", "--preset", "T1L", "--method", "levels"], 3),
     ("t1", ["uts", "--preset", "T1"], 5), ("t5", ["uts", "--preset", "T5"], 5), ("t3", ["uts", "--preset", "T3"], 3),
     ("t3l", ["uts", "--preset", "T3L"], 2), ("t2l", ["uts", "--preset", "T2L"], 3),
     ("fib44", ["fib", "-n", "44"], 3), ("fib40 levels", ["fib", "-n", "40", "--method", "levels"], 3),
     ("memset 2^26", ["memset", "--tasks", str(1 << 26)], 5))
for rnd in (1, 2):
    for v in ("head", "new"):
        nq(v)
    for v in ("head", "new"):
        nq(v, "16")
    for name, a, reps in W:
        for v in ("head", "new"):
            run("%s %s" % (name, v), v, a, reps)
PY
timeout 300 python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== compute-sanitizer on nqueens 11 (new) at ${SECONDS}s" | tee -a $L
for tool in memcheck racecheck synccheck; do
  timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 99 /tmp/nqueens-new 11 --cuda > /tmp/san.txt 2>&1; echo "$tool rc=$?" | tee -a $L
  grep -E "solutions|SUMMARY" /tmp/san.txt | tee -a $L
done
echo "== gpu-check (default sections) at ${SECONDS}s" | tee -a $L
export MGWS_PTX=/tmp/new.ptx
GPU_CHECK_BUDGET=200 bash scripts/gpu-check.sh --on-device 2>&1 | tail -75 | tee -a $L
cd $OUT && tar czf gpu-check.tgz gpu-check && rm -rf gpu-check
echo "== done at ${SECONDS}s" | tee -a $L
