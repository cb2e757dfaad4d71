"""Every command and snippet in README.md and docs/ is valid as written.

Each ``yomiage`` command of a shell block must parse with the real argument
parser (voices from the hub cannot be fetched here, so the commands that need
one are parsed, not run); each Python block must compile; the commands that
need nothing from outside run (README's examples run in test_readme.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from yomiage.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(language: str) -> list[tuple[str, str]]:
    out = []
    for path in DOCS:
        for block in re.findall(rf"```{language}\n(.*?)```", path.read_text("utf-8"), re.S):
            out.append((path.name, block))
    return out


def _commands() -> list[tuple[str, list[str]]]:
    """``yomiage`` invocations of the shell blocks, joined across ``\\`` and cut at pipes."""
    found = []
    for name, block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            words = shlex.split(line, comments=True)
            words = words[: words.index("|")] if "|" in words else words
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value yomiage ...
                words = words[1:]
            if words[:1] == ["yomiage"]:
                found.append((name, words[1:]))
            for i, word in enumerate(words):  # `... && .venv/bin/yomiage g2p ...`
                if word.endswith("/yomiage") and i + 1 < len(words):
                    end = words.index("&&", i) if "&&" in words[i:] else len(words)
                    found.append((name, words[i + 1 : end]))
    return found


COMMANDS = _commands()


def test_the_docs_have_commands() -> None:
    assert len(COMMANDS) >= 15
    assert {name for name, _ in COMMANDS} >= {"README.md", "cli.md", "server.md"}


@pytest.mark.parametrize(("doc", "args"), COMMANDS, ids=[" ".join(a)[:60] for _, a in COMMANDS])
def test_command_parses(doc: str, args: list[str]) -> None:
    parser = build_parser()
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{doc}: `yomiage {shlex.join(args)}` does not parse (exit {exc.code})")
    assert callable(parsed.func)


@pytest.mark.parametrize(("doc", "code"), _blocks("python"), ids=lambda v: str(v)[:40])
def test_python_block_compiles(doc: str, code: str) -> None:
    compile(code, doc, "exec")


def test_commands_that_need_nothing_from_outside_run(tmp_path: Path) -> None:
    env_dict = tmp_path / "words.json"
    runnable = [
        ["g2p", "--json", "円周率は3.14、成功率は50%です。"],
        ["dict", "--user-dict", str(env_dict), "add", "担々麺", "タンタンメン", "--accent", "3"],
        ["dict", "--user-dict", str(env_dict), "list"],
        ["dict", "--user-dict", str(env_dict), "remove", "担々麺"],
        ["voices"],
        ["voices", "--format", "sbv2", "--json"],
    ]
    documented = {args[0] for _, args in COMMANDS if args}
    for args in runnable:
        assert args[0] in documented, args
        run = subprocess.run(
            [sys.executable, "-m", "yomiage", *args], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, (args, run.stderr)


def test_kuberay_manifest_deploys_the_documented_serve_config() -> None:
    """docs/scale.md's RayService carries the same application as its serve config (the
    serve config itself is deployed in test_ray_serve.py)."""
    yaml = pytest.importorskip("yaml")
    blocks = dict(
        (block.splitlines()[0], yaml.safe_load(block))
        for name, block in _blocks("yaml")
        if name == "scale.md"
    )
    config = next(v for k, v in blocks.items() if k.startswith("# serve config"))
    manifest = blocks["# KubeRay RayService"]
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayService")
    served = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    assert served["applications"] == config["applications"]
    (app,) = config["applications"]
    assert app["import_path"] == "yomiage.ray:app"
    pytest.importorskip("ray.serve")
    from yomiage.ray.app_args import AppArgs

    AppArgs.model_validate(app["args"])  # the arguments are valid as written
    cluster = manifest["spec"]["rayClusterConfig"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    (workers,) = cluster["workerGroupSpecs"]
    (container,) = workers["template"]["spec"]["containers"]
    cpus = int(container["resources"]["requests"]["cpu"])
    assert cpus % app["args"]["threads"] == 0, "a worker pod holds whole replicas"


# The pages a reader follows links through: README, docs/ and the benchmark results.
PAGES = [*DOCS, ROOT / "benchmarks" / "RESULTS.md", ROOT / "benchmarks" / "history" / "README.md"]


def _without_code(page: Path) -> str:
    return re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)


def _anchors(page: Path) -> set[str]:
    """The #fragments GitHub makes of a page's headings (a repeated one numbered -1, -2)."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", _without_code(page), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = 0
        while (f"{slug}-{n}" if n else slug) in anchors:
            n += 1
        anchors.add(f"{slug}-{n}" if n else slug)
    return anchors


def _dead(page: Path, target: str) -> bool:
    path, _, fragment = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return True
    return bool(fragment) and linked.suffix == ".md" and fragment not in _anchors(linked)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Issue 47 (8): the passes and the wheel log moved to benchmarks/history/ and the plan's
    notes to docs/performance.md; a link left at an old place is a dead end for a reader."""
    if not page.exists():
        pytest.skip(f"{page.relative_to(ROOT)} is not in this checkout")
    targets = re.findall(r"\]\(([^)\s]+)\)", _without_code(page))
    dead = [t for t in targets if not re.match(r"[a-z]+:", t) and _dead(page, t)]
    assert not dead, f"{page.relative_to(ROOT)}: links to nothing: {dead}"


def test_the_readme_is_a_newcomers_page() -> None:
    """Issue 47 (8): the README had grown to 419 lines, ~70 of them a lab notebook of
    decoder figures per CPU; it stays a page a newcomer reads, the details in docs/."""
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 300
    assert "docs/performance.md" in text
    assert not re.search(r"runtime/plan_\w+\.py|not re-measured on AMX", text)


def test_results_opens_with_a_table_per_cpu_family() -> None:
    """Issue 47 (8): RESULTS.md was 3,198 lines of passes with the per-CPU table written out
    three times; it opens with one table per family, each measured row with its commit."""
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text("utf-8")
    body = results.split("## How these are measured")[0]
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", body, flags=re.M | re.S))
    for family in ("Zen 3", "Zen 4", "Zen 5", "Xeon with AMX", "ARM64"):
        [name] = [s for s in sections if family in s]
        lines = [
            [cell.strip() for cell in line.strip("|").split("|")]
            for line in sections[name].splitlines()
            if line.startswith("|")
        ]
        assert lines, family
        header = lines[0]
        for row in lines[1:]:
            if "short / medium / long / xlong" in row:  # a family's earlier table
                header = row
                continue
            if set("".join(row)) <= {"-", " "}:
                continue
            figures, commit, command = (
                header.index(title)
                for title in ("short / medium / long / xlong", "commit, date", "command")
            )
            if row[figures] in ("open", "not measured"):
                continue
            assert re.search(r"\b[0-9a-f]{7,40}\b", row[commit]), (family, row)
            assert row[command], (family, row)
    assert (ROOT / "benchmarks" / "history" / "issue-32.md").exists()
