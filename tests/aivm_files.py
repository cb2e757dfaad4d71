"""AIVMX test files for the model store's tests: the committed tiny voice, variants of it
with manifest fields changed, and checks of what a store leaves in its folder."""

from __future__ import annotations

import hashlib
import json
import uuid as uuidlib
from pathlib import Path

import onnx

from tests.conftest import TEST_VOICES
from yomiage.aivmx.store import SOURCES_FILE, InstalledModel, ModelStore

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"
UUID = "13eb270c-b01d-1efb-f7a0-a7cad39034d3"
OTHER_UUID = "0b8ac1c2-0000-4000-8000-000000000001"


def variant(**manifest: str) -> bytes:
    """The tiny voice with manifest fields changed (a new version, another uuid...)."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest":
            prop.value = json.dumps({**json.loads(prop.value), **manifest}, ensure_ascii=False)
    return bytes(model.SerializeToString())


def own_voice(uuid: str, name: str) -> bytes:
    """Another voice of its own: the tiny voice under a new uuid and name, with speaker
    uuids of its own (derived from ``uuid``), so its VOICEVOX style ids are its own."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest":
            manifest = json.loads(prop.value)
            for n, speaker in enumerate(manifest["speakers"]):
                speaker["uuid"] = str(uuidlib.uuid5(uuidlib.UUID(uuid), f"speaker {n}"))
            prop.value = json.dumps({**manifest, "uuid": uuid, "name": name}, ensure_ascii=False)
    return bytes(model.SerializeToString())


def without_a_neutral_style(uuid: str) -> bytes:
    """A voice whose styles are s0, s1, s2: it loads, then fails its warm-up (which reads
    in the default style, "Neutral", that it does not have)."""
    model = onnx.load(str(AIVMX))
    for prop in model.metadata_props:
        if prop.key == "aivm_manifest":
            manifest = json.loads(prop.value)
            for speaker in manifest["speakers"]:
                for n, style in enumerate(speaker["styles"]):
                    style["name"] = f"s{n}"
            manifest.update(uuid=uuid, name="no neutral style")
            prop.value = json.dumps(manifest, ensure_ascii=False)
        if prop.key == "aivm_hyper_parameters":
            hyper = json.loads(prop.value)
            ids = hyper["data"]["style2id"].values()
            hyper["data"]["style2id"] = {f"s{n}": i for n, i in enumerate(ids)}
            prop.value = json.dumps(hyper)
    return bytes(model.SerializeToString())


def voice_files() -> dict[str, bytes]:
    """The tiny voice (v1), a newer version of it (v2) and another voice (other)."""
    return {
        "v1": AIVMX.read_bytes(),
        "v2": variant(version="2.0.0"),
        "other": variant(uuid=OTHER_UUID, name="another voice"),
    }


def upload_to(store: ModelStore, data: bytes, chunk: int = 1 << 20) -> InstalledModel:
    with store.receive() as upload:
        for start in range(0, len(data), chunk):
            upload.write(data[start : start + chunk])
        return store.install_upload(upload)


def leftovers(root: Path) -> list[str]:
    """Partial or temporary files in the store's folder (there must be none)."""
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records(root: Path) -> dict[str, object]:
    path = root / SOURCES_FILE
    return json.loads(path.read_text())["models"] if path.exists() else {}
