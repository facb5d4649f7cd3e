#!/usr/bin/env bash
# Session 24, call B (2 H200s): where 2 GPUs lose on MEMSET 2^28 and FIB(44) at HEAD.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/new.ptx
export MGWS_PTX=/tmp/new.ptx B=$PWD/$C/mgws
L=$OUT/callB.txt
echo "commit $(cat $C/COMMIT)" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, sys, time
B = os.environ["B"]
def run(label, args, env_extra=None, reps=3):
    env = dict(os.environ, MGWS_LOG="mgws=debug")
    if env_extra: env.update(env_extra)
    t = time.time()
    p = subprocess.run([B, "run"] + args + ["--device", "cuda", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    rates, gpu_t, stats = [], [], None
    for line in out.splitlines():
        if line.startswith("{"):
            v = json.loads(line)
            if not v.get("verified"): print("NOT VERIFIED", label, line[:500]); continue
            rates.append("%.4g" % v["tasks_per_s"]); stats = v.get("stats")
        elif "a GPU's kernel time" in line:
            gpu_t.append(line.split("kernel_s=")[-1].strip()[:8])
    if not rates:
        print("%-44s FAILED\n%s" % (label, out[-2000:])); return
    print("%-44s %s  gpu_s %s" % (label, " ".join(rates), " ".join(gpu_t)), flush=True)
    if stats: print("    stats", stats, flush=True)
M = lambda n: ["memset", "--tasks", str(n)]
for rnd in (1, 2):
    for d in ("0", "0,1"):
        run("memset 2^28 d=%s" % d, M(1 << 28) + ["--devices", d])
        run("memset 2^28 chunk 128 d=%s" % d, M(1 << 28) + ["--devices", d, "--local-capacity", "256", "--initial-chunk", "128"])
        run("memset 2^29-1 d=%s" % d, M((1 << 29) - 1) + ["--devices", d], reps=2)
        run("memset 2^28 static d=%s" % d, M(1 << 28) + ["--devices", d, "--method", "static"])
        run("fib 44 d=%s" % d, ["fib", "-n", "44", "--devices", d])
    run("memset 2^28 d=0 scope=system", M(1 << 28) + ["--devices", "0"], {"MGWS_QUEUE_SCOPE": "system"})
    run("fib 44 d=0 scope=system", ["fib", "-n", "44", "--devices", "0"], {"MGWS_QUEUE_SCOPE": "system"})
    run("memset 2^28 d=0,1 same-device-only", M(1 << 28) + ["--devices", "0,1", "--same-device-only"])
    run("memset 2^28 d=0,1 single-home", M(1 << 28) + ["--devices", "0,1", "--area-layout", "single-home"])
    for b in ("0.5", "0.99"):
        run("fib 44 d=0,1 bias %s" % b, ["fib", "-n", "44", "--devices", "0,1", "--same-device-bias", b])
    run("fib 44 d=0,1 workers-per-sm? 3168->2x1760", ["fib", "-n", "44", "--devices", "0,1", "--workers", "3520"])
PY
python3 /tmp/drive.py 2>&1 | tee -a $L
echo "== done at ${SECONDS}s" | tee -a $L
