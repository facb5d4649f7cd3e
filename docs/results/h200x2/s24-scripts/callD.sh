#!/usr/bin/env bash
# Session 24, call D (2 H200s): steals also kept on the own GPU until its home ranges are all
# claimed (new) against 4fcab64 (old), alternating, two rounds.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws $C/old/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/new.ptx
gunzip -c $C/old/mgws_kernel.sm_90.ptx.gz > /tmp/old.ptx
L=$OUT/callD.txt
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
        print("%s %-30s FAILED\n%s" % (v, label, out[-1500:]), flush=True); return
    ngpu = 2 if "0,1" in args else 1
    runs = [max(gpu_t[i:i + ngpu]) for i in range(0, len(gpu_t), ngpu)]
    print("%s %-30s verified=%s ms %s  steals %s/%s" % (v, label, ok, " ".join("%.3f" % (1e3 * r) for r in runs), stats and stats.get("steals"), stats and stats.get("steal_attempts")), flush=True)
M = lambda n: ["memset", "--tasks", str(n)]
for rnd in (1, 2):
    for v in ("old", "new"):
        for d in ("0", "0,1"):
            run(v, "memset 2^28 d=%s" % d, M(1 << 28) + ["--devices", d], reps=5)
        run(v, "memset 2^26 d=0,1", M(1 << 26) + ["--devices", "0,1"], reps=5)
        for d in ("0", "0,1"):
            run(v, "fib 44 d=%s" % d, ["fib", "-n", "44", "--devices", d])
        run(v, "T2L d=0,1", ["uts", "--preset", "T2L", "--devices", "0,1"])
        run(v, "T1L d=0,1", ["uts", "--preset", "T1L", "--devices", "0,1"])
        run(v, "skew 2^20 k2 b12 d=0,1", ["skew", "--tasks", str(1 << 20), "--k", "2", "--bits", "12", "--devices", "0,1"])
run("new", "memset 2^28 d=0,1 same-device-only", M(1 << 28) + ["--devices", "0,1", "--same-device-only"], reps=5)
run("new", "memset 2^28 d=0,1 local-first 8", M(1 << 28) + ["--devices", "0,1", "--local-first", "8"], reps=5)
PY
python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== done at ${SECONDS}s" | tee -a $L
