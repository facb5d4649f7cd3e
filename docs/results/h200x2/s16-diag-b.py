import json, sys
# Usage: diag.py LABEL GPUS FILE: per run and GPU, each worker's mean cycles (M) in steal
# attempts, in successful remote steals (and their count), in idle rounds and in publishing,
# as shares of the run's elapsed cycles at 1.98 GHz.
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
        cols.append(f"g{g}: {m('tasks_run')/1e6:.2f}M/w steal {100*m('tasks_bridged_in')/total:.1f}% "
                    f"remote {100*m('initial_loads')/total:.1f}% ({m('narrow_batches'):.0f}/w of {m('steals'):.0f}, "
                    f"{m('initial_loads')/max(m('narrow_batches'),1e-9)/1.98e3:.1f}us each) idle {100*m('tasks_bridged_out')/total:.1f}% "
                    f"publish {100*m('spills')/total:.1f}% ({m('releases'):.0f}/w)")
    print(f"   {1e3*r['elapsed_s']:.2f} ms " + " | ".join(cols))
