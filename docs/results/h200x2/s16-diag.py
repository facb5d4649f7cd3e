import json, sys
# Usage: s16-diag.py b|c|d LABEL GPUS FILE: the summary of one `mgws run --json` of the
# diagnostic build of session 16's call B, C or D (s16-diag-<call>.patch), per run and GPU:
# each worker's mean cycles in the timed operations as shares of the run (1.98 GHz), and per
# operation in microseconds. The builds reuse statistics fields the runs do not otherwise use.
call, label, gpus, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{label}: no JSON ({e})"); sys.exit()
if "error" in d:
    print(f"{label}: ERROR {d['error'][:300]}"); sys.exit()
runs = [d] + d.get("repeats", [])
print(f"{label:40s} w={d['workers']} verified={all(r.get('verified') for r in runs)} rates: " + " ".join(f"{r['tasks_per_s']:.4g}" for r in runs))


def summary(m, pct, us):
    rel = max(m('releases'), 1e-9)
    if call == "b":  # steals, remote steals, idle rounds, publishing
        return (f"steal {pct('tasks_bridged_in'):.1f}% remote {pct('initial_loads'):.1f}% "
                f"({m('narrow_batches'):.0f}/w of {m('steals'):.0f}, {us('initial_loads', max(m('narrow_batches'), 1e-9)):.1f}us each) "
                f"idle {pct('tasks_bridged_out'):.1f}% publish {pct('spills'):.1f}% ({m('releases'):.0f}/w)")
    if call == "c":  # a publish: the lock, the waits for drained epochs
        return (f"publish {pct('spills'):.1f}% ({m('releases'):.0f}/w, {us('spills', rel):.1f}us) lock {pct('tasks_bridged_in'):.1f}% ({us('tasks_bridged_in', rel):.2f}us) "
                f"drain-other {pct('tasks_bridged_out'):.1f}% ({us('tasks_bridged_out', rel):.2f}us) drain-ending {pct('initial_loads'):.1f}% ({m('narrow_batches'):.0f}/w waited) acq={m('acquires'):.0f}/w st={m('steals'):.0f}/w")
    # d: a publish's copy and reopen, publishes from the overflow stack, acquires
    return (f"publish {pct('spills'):.1f}% ({m('releases'):.0f}/w, {us('spills', rel):.1f}us; from spill {m('narrow_batches'):.0f}) copy {pct('tasks_bridged_in'):.1f}% ({us('tasks_bridged_in', rel):.2f}us) "
            f"reopen {pct('tasks_bridged_out'):.1f}% ({us('tasks_bridged_out', rel):.2f}us) acquire {pct('initial_loads'):.1f}% ({m('acquires'):.0f}/w, {us('initial_loads', max(m('acquires'), 1e-9)):.2f}us)")


for r in runs:
    pw = r["per_worker"]; per = len(pw) // gpus
    total = r["elapsed_s"] * 1.98e9
    cols = []
    for g in range(gpus):
        ws = pw[g*per:(g+1)*per]; n = len(ws)
        m = lambda k: sum(w[k] for w in ws) / n
        pct = lambda k: 100 * m(k) / total
        us = lambda k, count: m(k) / count / 1.98e3
        cols.append(f"g{g}: {m('tasks_run')/1e6:.2f}M/w " + summary(m, pct, us) if call == "b" else f"g{g}: " + summary(m, pct, us))
    print(f"   {1e3*r['elapsed_s']:.2f} ms " + " | ".join(cols))
