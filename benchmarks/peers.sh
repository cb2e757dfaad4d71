#!/usr/bin/env bash
# yomiage against hayakoe 1.3.1 in one run, on the same full-size synthetic voice
# (../shared/peers/README.md makes the voice in both layouts and hayakoe's venv):
#   benchmarks/peers.sh BUNDLE [THREADS]
# BUNDLE: `yomiage convert $MODELS/model_assets/synthetic-jp-extra BUNDLE --bert
# $MODELS/bert --quantize q8`. Env: HAYAKOE_PY (the venv with hayakoe), MODELS.
# Prints two tables: yomiage's defaults, then decoder_precision="fp32"; every row
# is a fresh process per system and text.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
compare="$here/../../shared/peers/compare.sh"

[ -f "$compare" ] || { echo "no ../shared/peers/compare.sh beside the repository" >&2; exit 2; }
export PY=${PY:-$here/../.venv/bin/python}
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*/flags: '"$(grep -o -w -E 'avx512_bf16|amx_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/'
echo
echo "defaults (decoder_precision=auto)"
bash "$compare" "$@"
echo
echo 'decoder_precision="fp32"'
YOMIAGE_TTS_KWARGS='{"decoder_precision": "fp32"}' bash "$compare" "$@"
