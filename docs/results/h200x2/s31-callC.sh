#!/usr/bin/env bash
# Session 31, call C (2 H200s): does a 2-GPU run start late because the second GPU's launch is
# not yet submitted when the gate opens? An experimental build (HEAD plus MGWS_X_FLUSH: query
# every stream after the launches, "all", or each right after its launch, "each"), against it
# unset (= HEAD), alternating, two rounds; kernel time = the slower GPU's.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/x/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/k.ptx
export MGWS_PTX=/tmp/k.ptx
L=$OUT/callC.txt
echo "binary $(cat $C/COMMIT) + MGWS_X_FLUSH" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, statistics as st
def run(label, args, flush, reps):
    env = dict(os.environ, MGWS_LOG="mgws=debug")
    if flush: env["MGWS_X_FLUSH"] = flush
    p = subprocess.run([".device-carry/x/mgws", "run"] + args + ["--device", "cuda", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    js = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    t = [float(l.split("kernel_s=")[-1].split()[0]) for l in out.splitlines() if "a GPU's kernel time" in l]
    if not js or p.returncode != 0:
        print("%-34s FAILED rc=%d\n%s" % (label, p.returncode, out[-1500:]), flush=True); return
    n = len(t) // len(js)
    per_run = [max(t[i*n:(i+1)*n]) for i in range(len(js))]
    print("%-34s ok=%s med %9.1f us | %s" % (label, all(j["verified"] for j in js), st.median(per_run) * 1e6, " ".join("%.1f" % (1e6 * x) for x in per_run)), flush=True)
for rnd in (1, 2):
    for name, a in (("memset 2", ["memset", "--tasks", "2"]), ("memset 2^20", ["memset", "--tasks", str(1 << 20)]), ("memset 2^24", ["memset", "--tasks", str(1 << 24)]), ("fib 30", ["fib", "-n", "30"])):
        for dev in ("0", "0,1"):
            for flush in ("", "all", "each"):
                run("%s [%s] %s" % (name, dev, flush or "head"), a + ["--devices", dev], flush, 7)
PY
timeout 500 python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== done at ${SECONDS}s" | tee -a $L
