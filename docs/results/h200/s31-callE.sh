#!/usr/bin/env bash
# Session 31, call E (one H200): the quarter rotation of narrow tasks' slots. head (58926c7's
# kernel), v1 (spawned tasks written in plain order), v2 (v1 and tasks read in plain order, the
# lean static kernel too); same host binary, PTX by MGWS_PTX; N-Queens from each variant's build.
# Alternating, two rounds; medians of the GPU's kernel time.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
for v in head v1 v2; do
  gunzip -c $C/var/$v.ptx.gz > /tmp/$v.ptx
  gunzip -c $C/var/nqueens-$v.gz > /tmp/nqueens-$v; chmod +x /tmp/nqueens-$v
done
L=$OUT/callE.txt
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
    print("%-30s ok=%s med %10.1f us | %s" % (label, all(j["verified"] for j in js), st.median(t) * 1e6, " ".join("%.1f" % (1e6 * x) for x in t)), flush=True)
def nq(v):
    ts = []
    for i in range(5):
        p = subprocess.run(["/tmp/nqueens-" + v, "15", "--cuda"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            print("nqueens %s FAILED rc=%d %s" % (v, p.returncode, (p.stdout + p.stderr)[-800:]), flush=True); return
        ts.append(float(p.stdout.split(" in ")[-1].split()[0]))
    print("%-30s ok=True med %10.1f us | %s" % ("nqueens 15 " + v, st.median(ts) * 1e6, " ".join("%.1f" % (1e6 * x) for x in ts)), flush=True)
W = (("fib44", ["fib", "-n", "44"], 3), ("t1l", ["uts", "--preset", "T1L"], 5), ("t1", ["uts", "--preset", "T1"], 5),
     ("t3l", ["uts", "--preset", "T3L"], 2), ("memset 2^26", ["memset", "--tasks", str(1 << 26)], 5),
     ("memset 2^26 static", ["memset", "--tasks", str(1 << 26), "--method", "static"], 5),
     ("skew", ["skew"], 3))
for rnd in (1, 2):
    for v in ("head", "v1", "v2"):
        nq(v)
    for name, a, reps in W:
        for v in ("head", "v1", "v2"):
            run("%s %s" % (name, v), v, a, reps)
PY
timeout 560 python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== done at ${SECONDS}s" | tee -a $L
