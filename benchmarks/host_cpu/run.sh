#!/usr/bin/env bash
# Issue 32 on a lent GPU machine's host CPU, in one call of under 10 minutes: build the peers'
# full-size models (../shared/peers/make_full_models.py), convert them, then measure yomiage
# (defaults, fp32, a 1,400 MB budget, extra voices) and hayakoe side by side, each job pinned
# to 2 cores of its own, and the CUDA tests while the models are made. Results land in $OUT as
# they come, the whole of them in results.tar.gz (a call returns at most 8 files).
#
# Before the call, here: `bash benchmarks/host_cpu/make_sites.sh` (-> .devrun/, ignored), and
# keep what travels under 64 MiB: on 2026-11-27 the tracked files were 45 MiB and .devrun 24,
# so tests/data/voices/hayakoe and tests/data/aivmx were taken out of the index for the call
# (`git rm -r -q --cached ...` and the two paths in .git/info/exclude; `git reset -q -- ...`
# after). Then: run(command="OUT=$OUT bash benchmarks/host_cpu/run.sh", carry=[".devrun"],
# timeout_s=590).
# Rehearsal on this machine (Python 3.12 with the image's packages, torch CPU):
#   MODE=rehearsal OUT=/tmp/reh TEXTS=short PYBIN=/tmp/dev312/bin/python bash benchmarks/host_cpu/run.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1 HF_HUB_OFFLINE=1
R=$(pwd); FINAL=${OUT:-/tmp/out}; W=/tmp/w; rm -rf "$W"; OUT=$W/results; mkdir -p "$OUT" "$FINAL"
MODE=${MODE:-device}; PYBIN=${PYBIN:-python3}; TEXTS=${TEXTS:-"short medium long xlong"}
DEADLINE=${DEADLINE:-575}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/progress.log"; }
left() { local l=$(( DEADLINE - $(el) )); [ $l -gt 1 ] || l=1; echo $l; }  # timeout 0 would mean none
if [ "$MODE" = device ]; then
  C_A=0,1; C_B=2,3; C_C=4,5; C_D=6,7; C_E=8,9; C_X=10,11; C_M=2-7; C_V=8-15; NM=6
else
  C_A=0,1; C_B=0,1; C_C=0,1; C_D=0,1; C_E=0,1; C_X=0,1; C_M=0,1; C_V=0,1; NM=2
fi
pin() { local c=$1; shift; if command -v taskset >/dev/null; then taskset -c "$c" "$@"; else "$@"; fi; }
MODELS=/tmp/peers-models-dev; BUNDLE=/tmp/full-bundle-dev
[ "$MODE" = device ] || { MODELS=/tmp/reh-models; BUNDLE=/tmp/reh-bundle; }
rm -rf "$MODELS" "$BUNDLE" /tmp/zc-*

# --- sites: OpenVINO etc. for yomiage (sy), hayakoe and its needs (sh); dictionaries from the repo
tar -C "$W" -xJf .devrun/sites.tar.xz
dics() { PYTHONPATH="$W/sy" "$PYBIN" tools/openjtalk_dictionaries.py unpack "$@"; }  # from their pack
dics "$W/sh/pyopenjtalk" open_jtalk_dic_utf_8-1.11
dics src/yomiage/_data
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$R/src:$W/sy" "$PYBIN" > "$W/ypy"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$W/sh" "$PYBIN" > "$W/mpy"
# hayakoe as a CPU user installs it has no torch; the image's would make transformers load it (+700 MB)
mkdir -p "$W/notorch"; printf 'import sys\nsys.modules["torch"] = None\n' > "$W/notorch/sitecustomize.py"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$W/notorch:$W/sh" "$PYBIN" > "$W/hpy"
chmod +x "$W/ypy" "$W/hpy" "$W/mpy"
say "sites ready"
{
  lscpu; echo; grep -m1 -E '^flags' /proc/cpuinfo; echo; nproc; free -m; uname -a
  nvidia-smi -L 2>&1 | head -3
  "$W/ypy" -c "import openvino, onnxruntime, numpy, yomiage; print('openvino', openvino.__version__, 'ort', onnxruntime.__version__, 'numpy', numpy.__version__)"
  "$W/hpy" -c "import hayakoe, pyopenjtalk, sys; print('hayakoe ok', pyopenjtalk.__file__, 'torch hidden:', sys.modules.get('torch', 0) is None)"
  git -C "$R" log -1 --format='yomiage %h %s' 2>/dev/null
} > "$OUT/machine.txt" 2>&1
say "machine: $(grep -m1 'Model name' "$OUT/machine.txt" | sed 's/  */ /g'); amx: $(grep -c amx_tile /proc/cpuinfo)"

# --- A: CUDA tests (cores A) while the models are built on the others
# (in a rehearsal they skip, which still checks that they collect)
( pin $C_A timeout 240 "$W/ypy" -m pytest -q -x -m "slow or not slow" -p no:cacheprovider tests/test_cuda.py \
    > "$OUT/cuda_tests.log" 2>&1; say "cuda tests done: $(tail -1 "$OUT/cuda_tests.log")" ) &

# --- models: the peers' script (seeded, full size), then yomiage convert as soon as the voice exists
( pin $C_M timeout 400 "$W/mpy" .devrun/peers/make_full_models.py --out "$MODELS" --threads $NM > "$OUT/models.log" 2>&1
  say "models done rc=$?" ) &
MPID=$!
while ! grep -q '"voice"' "$MODELS/manifest.json" 2>/dev/null; do
  sleep 2
  if ! kill -0 $MPID 2>/dev/null; then say "models failed before the voice"; tail -20 "$OUT/models.log"; break; fi
  [ "$(left)" -lt 200 ] && { say "no voice in time"; break; }
done
say "voice written; converting"
pin $C_V timeout 300 "$W/ypy" -m yomiage convert "$MODELS/model_assets/synthetic-jp-extra" "$BUNDLE" \
  --bert "$MODELS/bert/deberta-v2-large-japanese-char-wwm" --quantize q8 > "$OUT/convert.log" 2>&1
say "convert rc=$? ($(tail -1 "$OUT/convert.log"))"
wait $MPID
say "models and bundle ready: $(du -sh "$MODELS" "$BUNDLE" | tr '\n' ' ')"

# --- the rows: perf_worker.py from ../shared/peers, each job on its own cores, all at once
P=.devrun/peers/perf_worker.py
row() {  # cores tag system text [env...]
  local c=$1 tag=$2 sys=$3 key=$4; shift 4
  local py="$W/ypy"; [ "$sys" = hayakoe ] && py="$W/hpy"
  local line
  [ "$(left)" -gt 15 ] || { say "$tag $key: not run (deadline)"; return; }
  line=$(env "$@" timeout "$(left)" taskset -c "$c" "$py" "$P" "$sys" "$key" "$MODELS" "$BUNDLE" 2 2>>"$OUT/rows.err" | tail -1)
  case "$line" in "{"*) echo "{\"tag\": \"$tag\", \"cores\": \"$c\", ${line#\{}" >> "$OUT/rows.jsonl"; say "$tag $key: $line";;
    *) say "$tag $key: no result";; esac
}
# The default's xlong row waits for the plan its short row measures, then runs on cores of its own.
( for k in $TEXTS; do [ $k = xlong ] || row $C_A default yomiage $k YOMIAGE_CACHE=/tmp/zc-default; done ) &
case " $TEXTS " in *" xlong "*)
  ( until ls /tmp/zc-default/plans/*.json >/dev/null 2>&1 || [ "$(left)" -lt 140 ]; do sleep 2; done
    row $C_X default yomiage xlong YOMIAGE_CACHE=/tmp/zc-default ) &;;
esac
( for k in $TEXTS; do row $C_B hayakoe hayakoe $k; done ) &
( for k in $TEXTS; do row $C_C fp32 yomiage $k YOMIAGE_CACHE=/tmp/zc-fp32 'YOMIAGE_TTS_KWARGS={"decoder_precision": "fp32"}'; done ) &
( for k in $TEXTS; do row $C_E budget1400 yomiage $k YOMIAGE_CACHE=/tmp/zc-b1400 'YOMIAGE_TTS_KWARGS={"memory_budget_mb": 1400}'; done ) &
if [ "$MODE" = device ]; then
  ( YOMIAGE_CACHE=/tmp/zc-vm timeout "$(left)" taskset -c $C_D "$W/ypy" benchmarks/voice_memory.py "$BUNDLE" --voices 3 \
      > "$OUT/voice_memory.txt" 2>&1; say "voice_memory done" ) &
fi
wait
say "rows done"
# the plan each cache chose, and its alternatives (read from the cache: no new measuring)
YOMIAGE_CACHE=/tmp/zc-default timeout "$(left)" taskset -c $C_A "$W/ypy" -m yomiage bench --model "$BUNDLE" --threads 2 --quick --repeat 1 \
  > "$OUT/plan_default.txt" 2>&1 &
YOMIAGE_CACHE=/tmp/zc-b1400 timeout "$(left)" taskset -c $C_E "$W/ypy" -m yomiage bench --model "$BUNDLE" --threads 2 --quick --repeat 1 --memory-budget-mb 1400 \
  > "$OUT/plan_b1400.txt" 2>&1 &
wait
say "plans printed"
mkdir -p "$OUT/plans"
for c in /tmp/zc-*; do [ -d "$c/plans" ] && cp -r "$c/plans" "$OUT/plans/${c#/tmp/zc-}"; done
"$PYBIN" - "$OUT/rows.jsonl" <<'EOF' | tee "$OUT/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {(r["tag"], r["text"]): r for r in rows}
print("| text | hayakoe x rt | " + " | ".join(f"{t}: x rt (ratio), first audio s, peak MB, load s" for t in ("default", "fp32", "budget1400")) + " | hayakoe first audio, peak MB, load s |")
print("|" + " --- |" * 6)
for k in ("short", "medium", "long", "xlong"):
    h = by.get(("hayakoe", k))
    cells = []
    for t in ("default", "fp32", "budget1400"):
        y = by.get((t, k))
        cells.append("-" if not y else f"{y['speed']:.2f}" + (f" ({y['speed'] / h['speed']:.2f}x)" if h else "") + f", {y['ttfa_s']:.2f}, {y['peak_rss_mb']:.0f}, {y['load_s']:.1f}")
    hs = f"{h['speed']:.2f}" if h else "-"
    he = f"{h['ttfa_s']:.2f}, {h['peak_rss_mb']:.0f}, {h['load_s']:.1f}" if h else "-"
    print(f"| {k} | {hs} | " + " | ".join(cells) + f" | {he} |")
EOF
say "end"
tar -C "$W" -czf "$FINAL/results.tar.gz" results && cp "$OUT/table.md" "$OUT/progress.log" "$FINAL/"
