import json, sys
# Usage: diag3.py LABEL GPUS FILE: publish's total, copy and reopen cycles, publishes from the
# overflow stack, and acquire's cycles, per worker as shares of the run (1.98 GHz) and per call.
label, gpus, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{label}: no JSON ({e})"); sys.exit()
if "error" in d:
    print(f"{label}: ERROR {d['error'][:300]}"); sys.exit()
runs = [d] + d.get("repeats", [])
print(f"{label:40s} w={d['workers']} verified={all(r.get('verified') for r in runs)} rates: " + " ".join(f"{r['tasks_per_s']:.4g}" for r in runs))
for r in runs:
    pw = r["per_worker"]; per = len(pw) // gpus
    total = r["elapsed_s"] * 1.98e9
    cols = []
    for g in range(gpus):
        ws = pw[g*per:(g+1)*per]; n = len(ws)
        m = lambda k: sum(w[k] for w in ws) / n
        rel = max(m('releases'), 1e-9); acq = max(m('acquires'), 1e-9)
        pct = lambda k: 100 * m(k) / total
        us = lambda k, c: m(k) / c / 1.98e3
        cols.append(f"g{g}: publish {pct('spills'):.1f}% ({m('releases'):.0f}/w, {us('spills', rel):.1f}us; from spill {m('narrow_batches'):.0f}) copy {pct('tasks_bridged_in'):.1f}% ({us('tasks_bridged_in', rel):.2f}us) "
                    f"reopen {pct('tasks_bridged_out'):.1f}% ({us('tasks_bridged_out', rel):.2f}us) acquire {pct('initial_loads'):.1f}% ({m('acquires'):.0f}/w, {us('initial_loads', acq):.2f}us)")
    print(f"   {1e3*r['elapsed_s']:.2f} ms " + " | ".join(cols))
