from __future__ import annotations

import subprocess
import sys


def test_import_does_not_pull_heavy_dependencies() -> None:
    code = (
        "import sys, yomiage, yomiage.text, yomiage.cli, yomiage.batch\n"
        "from yomiage.cli.main import build_parser; build_parser()\n"
        "heavy = ('torch', 'transformers', 'fastapi', 'onnxruntime', 'ray')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_names() -> None:
    import yomiage
    import yomiage.text

    assert {"TextError", "UserDictionaryError", "YomiageError"} <= set(yomiage.__all__)
    assert {"Frontend", "Phonemes", "UserDictionary", "split_sentences"} <= set(
        yomiage.text.__all__
    )
