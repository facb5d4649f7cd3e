import csv, gzip, sys, collections
f = sys.argv[1]
rows = list(csv.reader(gzip.open(f, 'rt')))
hdr_i = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
hdr = rows[hdr_i]; ix = {h: i for i, h in enumerate(hdr)}
data = [r for r in rows[hdr_i+1:] if len(r) == len(hdr)]
def num(x):
    try: return float(x.replace(',', ''))
    except: return 0.0
tot = sum(num(r[ix["Instructions Executed"]]) for r in data)
base = int(data[0][0], 16)
# group consecutive instructions with the same executed count into blocks
blocks = []
cur = None
for r in data:
    ex = num(r[ix["Instructions Executed"]])
    a = int(r[0], 16) - base
    if cur and cur[2] == ex:
        cur[1] = a; cur[3].append(r[ix["Source"]].strip()); 
    else:
        cur = [a, a, ex, [r[ix["Source"]].strip()], num(r[ix["Avg. Threads Executed"]])]
        blocks.append(cur)
blocks.sort(key=lambda b: -b[2] * len(b[3]))
print(f, "total", tot)
for b in blocks[:int(sys.argv[2])]:
    n = len(b[3])
    ops = collections.Counter((s.split()[1] if s.startswith('@') else s.split()[0]) for s in b[3])
    print("0x%05x-0x%05x n=%3d ex=%.3e share=%5.2f%% thr=%.1f  %s" % (b[0], b[1], n, b[2], 100*b[2]*n/tot, b[4], ", ".join("%s:%d" % kv for kv in ops.most_common(6))))
