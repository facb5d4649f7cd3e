#!/usr/bin/env bash
# Session 24, call E (2 H200s), the code of 4fcab64: where MEMSET's 2-GPU loss lies (victim
# policies); set-up across 2 launchers; compute-sanitizer over 2 GPU PEs and beside CPU workers
# on 2 GPUs; then gpu-check's nodes section.
set -u
cd "$(dirname "$0")/.."
C=.device-carry
chmod +x $C/mgws
gunzip -c $C/mgws_kernel.sm_90.ptx.gz > /tmp/k.ptx
gunzip -c $C/mgws_kernel.sm_90.nvshmem.ptx.gz > /tmp/k.nvshmem.ptx
export MGWS_PTX=/tmp/k.ptx MGWS_NVSHMEM_PTX=/tmp/k.nvshmem.ptx B=$PWD/$C/mgws
L=$OUT/callE.txt
echo "commit $(cat $C/COMMIT)" | tee $L
cat > /tmp/drive.py <<'PY'
import json, os, subprocess, sys, time
B = os.environ["B"]
def run(label, args, reps=3):
    env = dict(os.environ, MGWS_LOG="mgws=debug")
    p = subprocess.run([B, "run"] + args + ["--device", "cuda", "--termination", "hierarchical", "--json", "--repeat", str(reps)], capture_output=True, text=True, timeout=150, env=env)
    out = p.stdout + p.stderr
    ok, gpu_t, stats = None, [], None
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line); ok = j.get("verified"); stats = j.get("stats")
        elif "a GPU's kernel time" in line:
            gpu_t.append(float(line.split("kernel_s=")[-1].strip()[:10]))
    if ok is None:
        print("%-40s FAILED\n%s" % (label, out[-1500:]), flush=True); return
    ngpu = 2 if "0,1" in args else 1
    runs = [max(gpu_t[i:i + ngpu]) for i in range(0, len(gpu_t), ngpu)]
    print("%-40s verified=%s ms %s  steals %s/%s" % (label, ok, " ".join("%.3f" % (1e3 * r) for r in runs), stats and stats.get("steals"), stats and stats.get("steal_attempts")), flush=True)
def setup(label, args, nodes=False, port=0):
    t = time.time()
    if nodes:
        env = dict(os.environ, NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME="lo", NVSHMEM_REMOTE_TRANSPORT="none")
        ps = [subprocess.Popen([B] + args + ["--nodes", "2", "--coordinator", "127.0.0.1:%d" % port, "--devices", str(r), "--node-rank", str(r), "--json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for r in (0, 1)]
        outs = [p.communicate(timeout=150)[0] for p in ps]
    else:
        outs = [subprocess.run([B] + args + ["--json"], capture_output=True, text=True, timeout=150).stdout]
    wall = time.time() - t
    for r, o in enumerate(outs):
        for line in o.splitlines():
            if line.startswith("{"):
                v = json.loads(line)
                print("%-40s [%d] verified=%s rate %.4g setup_s %.3f wall %.2f s" % (label, r, v.get("verified"), v["tasks_per_s"], v["setup_s"], wall), flush=True)
                break
        else:
            print("%-40s [%d] FAILED wall %.2f\n%s" % (label, r, wall, o[-1500:]), flush=True)
M = ["memset", "--tasks", str(1 << 28), "--devices", "0,1"]
for rnd in (1, 2):
    run("memset 2^28 2 GPUs default", M, reps=5)
    run("memset 2^28 2 GPUs same-device-only", M + ["--same-device-only"], reps=5)
    run("memset 2^28 2 GPUs local-first 65535", M + ["--local-first", "65535"], reps=5)
    run("memset 2^28 2 GPUs same-device-bias 1", M + ["--same-device-bias", "1"], reps=5)
    S = ["skew", "--tasks", str(1 << 20), "--k", "2", "--bits", "12", "--devices", "0,1"]
    run("skew 2^20 k2 2 GPUs default", S)
    run("skew 2^20 k2 2 GPUs same-device-only", S + ["--same-device-only"])
N = ["run", "memset", "--tasks", str(1 << 27), "--device", "cuda"]
for rnd in (1, 2):
    setup("memset 2^27 one process 2 GPUs", N + ["--devices", "0,1"])
    setup("memset 2^27 2 PEs mapped", N + ["--processes", "2", "--devices", "0,1"])
    setup("memset 2^27 2 PEs device-api", N + ["--processes", "2", "--pe-transport", "device-api", "--devices", "0,1"])
    setup("memset 2^27 2 launchers device-api", N + ["--processes", "2", "--pe-transport", "device-api"], nodes=True, port=29400 + rnd)
PY
python3 /tmp/drive.py 2>&1 | tee -a $L
SAN=/usr/local/cuda/bin/compute-sanitizer
san() {
  local name=$1; shift
  echo "== $name" | tee -a $L
  timeout 170 "$@" > /tmp/san.txt 2>&1; echo "rc=$?" | tee -a $L
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verified|error:" /tmp/san.txt | sort | uniq -c | head -6 | tee -a $L
}
G=(--device cuda --termination hierarchical --watchdog-ms 600000)
san "memcheck fib 14, 2 GPUs + 2 CPU workers (bridge always)" $SAN --tool memcheck --error-exitcode 99 $B run fib -n 14 "${G[@]}" --devices 0,1 --workers 32 --cpu-workers 2 --bridge-policy always
san "racecheck fib 12, 2 GPUs + 2 CPU workers (bridge always)" $SAN --tool racecheck --error-exitcode 99 $B run fib -n 12 "${G[@]}" --devices 0,1 --workers 32 --cpu-workers 2 --bridge-policy always
for t in mapped device-api; do
  san "memcheck memset 4096, 2 PEs on 2 GPUs ($t)" $SAN --tool memcheck --target-processes all --error-exitcode 99 $B run memset --tasks 4096 "${G[@]}" --devices 0,1 --processes 2 --pe-transport $t --workers 16
  san "racecheck fib 12, 2 PEs on 2 GPUs ($t)" $SAN --tool racecheck --target-processes all --error-exitcode 99 $B run fib -n 12 "${G[@]}" --devices 0,1 --processes 2 --pe-transport $t --workers 16
done
echo "== gpu-check nodes at ${SECONDS}s" | tee -a $L
GPU_CHECK_BUDGET=$((600 - 25 - SECONDS)) bash scripts/gpu-check.sh --on-device nodes > $OUT/callE-gpu-check.txt 2>&1
tail -40 $OUT/callE-gpu-check.txt
echo "== done at ${SECONDS}s"
