"""Every output format of the commands that print results, on fixed campaigns, held against the
files in tests/golden/ (issue 26: a move of the rendering code must change no output).

The campaigns: the bundled data/attempts (two campaigns), the edge campaign of
tests/edge_campaign.py (+inf ratios, too few pairs, no reference time, an aborted attempt), and
the CI fixture of tests/test_ci_output.py (labels with every character Markdown reads, a control
character, a campaign blocked by an integrity error). Recorded rounds run a small deterministic
measured program with a fixed order seed.

A change that alters an output on purpose rewrites the files with
``EXPLAIN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_outputs.py`` and shows the
difference in its commit. Numbers in JSON and CSV are compared to 1e-12 relative (the explained
fraction's last bit may differ between BLAS builds); every other character exactly. What varies
from run to run (temporary paths, the rusage.* counters of real processes, the order seed of a
round that draws one) is replaced by a placeholder before the comparison.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from assess_fixtures import write_gain_and_blocked
from conftest import cli_result as _run
from edge_campaign import write_edge_campaign
from test_ci_output import _attempts as ci_attempts

from pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("EXPLAIN_UPDATE_GOLDEN") == "1"

MEASURED = (
    "import json, os\n"
    "side, rep = os.environ['EXPLAIN_SIDE'], int(os.environ['EXPLAIN_REPETITION'])\n"
    "factor = float(os.environ.get('FACTOR', '1')) if side == 'candidate' else 1.0\n"
    "shift = 3 if side == 'candidate' else 0\n"
    "wobble = 1 + 0.01 * ((rep * 7 + shift) % 5 - 2)\n"
    "attn, mlp, ref = 0.01 * factor * wobble, 0.02 * wobble, 0.005 * wobble\n"
    "doc = {'metric': attn + mlp + ref,\n"
    "       'breakdown': {'attention': attn, 'mlp': mlp, 'sampling': ref},\n"
    "       'counters': {'launches': round(100 * factor)}}\n"
    "open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write(json.dumps(doc))\n"
)
"""A run of the recorded rounds: attention scaled by $FACTOR on the candidate side and a wobble
of a few percent by side and repetition, so every interval is the same on every machine."""


def _measured(tmp: Path, factor: float) -> str:
    script = tmp / "measured.py"
    if not script.exists():
        script.write_text(MEASURED)
    return f"env FACTOR={factor} {sys.executable} {script}"


# -- the stores ----------------------------------------------------------------------------------
def _bundled(tmp: Path) -> Path:
    shutil.copytree(ROOT / "data" / "attempts", tmp / "attempts")
    return tmp / "attempts"


def _edges(tmp: Path) -> Path:
    return write_edge_campaign(tmp / "attempts")


def _ci_store(tmp: Path) -> Path:
    return write_gain_and_blocked(tmp / "store", ci_attempts)


def _ingested(make: Callable[[Path], Path]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        source, store = make(tmp), tmp / "store"
        with pytest.raises(SystemExit):
            main(["ingest", str(source), "--store", str(store)])
        return store

    return build


STORES: dict[str, Callable[[Path], Path]] = {
    "bundled": _ingested(_bundled),
    "edges": _ingested(_edges),
    "ci": _ci_store,
}
WHAT_IF = ["--what-if", "decision=paired", "--what-if", "require_explanation=true"]
ASSESS: dict[str, list[str]] = {
    "table": [],
    "json": ["--format", "json"],
    "json-digests": ["--format", "json", "--digests"],
    "csv": ["--format", "csv"],
    "csv-digests": ["--format", "csv", "--digests"],
    "markdown": ["--format", "markdown"],
    "what-if-table": WHAT_IF,
    "what-if-json": ["--format", "json", *WHAT_IF],
    "what-if-csv": ["--format", "csv", *WHAT_IF],
    "what-if-markdown": ["--format", "markdown", *WHAT_IF],
}
GATES = {"bundled": "llama-decode-2026-11", "edges": "edges", "ci": "c"}


# -- running and normalizing ----------------------------------------------------------------------


_RUSAGE_TEXT = re.compile(r"^(  counter\s+)rusage\.\S+ .*$", re.M)
_RUSAGE_MD = re.compile(r"^\| counter \| rusage\.\S+ \|.*$", re.M)


def _md_escaped(text: str) -> str:
    return re.sub(r"([\\`*_\[\]|~#])", r"\\\1", text)


def _normal(text: str, tmp: Path) -> str:
    for escape in (str, _md_escaped):  # Markdown writes the paths with `_` escaped
        text = text.replace(escape(str(tmp)), "<TMP>").replace(escape(sys.executable), "<PYTHON>")
    text = _RUSAGE_TEXT.sub(r"\1rusage.<varies>", text)
    text = _RUSAGE_MD.sub("| counter | rusage.<varies> |", text)
    return re.sub(r"explain-ab-[A-Za-z0-9_]+", "explain-ab-<random>", text)


def _document(code: int, out: str, err: str, files: dict[str, str] | None = None) -> str:
    parts = [f"exit {code}\n", "--- stdout\n", out, "--- stderr\n", err]
    for name, text in (files or {}).items():
        parts += [f"--- {name}\n", text]
    return "".join(parts)


def _numbers_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isfinite(a) and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_numbers_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_numbers_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _cell(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _sections(document: str) -> dict[str, str]:
    parts = re.split(r"^--- (.+)\n", document, flags=re.M)
    return {"head": parts[0], **dict(zip(parts[1::2], parts[2::2], strict=True))}


def _same(golden: str, actual: str) -> bool:
    """Exactly equal, or equal but for numbers within 1e-12 in JSON or CSV sections."""
    if golden == actual:
        return True
    want, got = _sections(golden), _sections(actual)
    if want.keys() != got.keys():
        return False
    for key, text in want.items():
        if text == got[key]:
            continue
        try:
            if not _numbers_equal(json.loads(text), json.loads(got[key])):
                return False
            continue
        except ValueError:
            pass
        rows = [[_cell(c) for c in r] for r in csv.reader(io.StringIO(text))]
        other = [[_cell(c) for c in r] for r in csv.reader(io.StringIO(got[key]))]
        if not rows or not _numbers_equal(rows, other):
            return False
    return True


def _check(name: str, actual: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: write it with EXPLAIN_UPDATE_GOLDEN=1"
    golden = path.read_text(encoding="utf-8")
    assert _same(golden, actual), f"{name}: output differs from {path}"


# -- the cases ------------------------------------------------------------------------------------
@pytest.mark.parametrize("store_name", sorted(STORES))
@pytest.mark.slow
def test_assess_formats(
    store_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = STORES[store_name](tmp_path)
    capsys.readouterr()
    for case, extra in ASSESS.items():
        code, out, err = _run(["assess", "--all", "--store", str(store), *extra], capsys)
        _check(f"assess-{store_name}-{case}", _normal(_document(code, out, err), tmp_path))


@pytest.mark.parametrize("store_name", sorted(STORES))
@pytest.mark.slow
def test_assess_ci_outputs(
    store_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--junit, the GitHub job summary and annotations, and the --gate line."""
    store = STORES[store_name](tmp_path)
    capsys.readouterr()
    junit, summary = tmp_path / "verdicts.xml", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = _run(["assess", "--all", "--store", str(store), "--junit", str(junit)], capsys)
    files = {"junit": junit.read_text(), "job summary": summary.read_text()}
    _check(f"ci-{store_name}-all", _normal(_document(code, out, err, files), tmp_path))
    monkeypatch.delenv("GITHUB_ACTIONS")
    code, out, err = _run(["assess", GATES[store_name], "--store", str(store), "--gate"], capsys)
    _check(f"ci-{store_name}-gate", _normal(_document(code, out, err), tmp_path))


@pytest.mark.parametrize("folder", ["llama-decode-2026-11", "bert-serving-throughput", "edges"])
@pytest.mark.slow
def test_campaign_final_and_plan(
    folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _edges(tmp_path) if folder == "edges" else _bundled(tmp_path)
    where, store = str(root / folder), str(tmp_path / "store")
    for fmt in ("table", "markdown"):
        code, out, err = _run(
            ["campaign", "final", where, "--store", store, "--format", fmt], capsys
        )
        _check(f"final-{folder}-{fmt}", _normal(_document(code, out, err), tmp_path))
    code, out, err = _run(["plan", where], capsys)
    _check(f"plan-{folder}", _normal(_document(code, out, err), tmp_path))


AB_CASES = {"gain": 0.5, "same": 1.0}


@pytest.mark.parametrize("case", sorted(AB_CASES))
@pytest.mark.slow
def test_ab_outputs(
    case: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ab` at its defaults in text and Markdown, with --junit and the GitHub outputs."""
    a, b = _measured(tmp_path, 1.0), _measured(tmp_path, AB_CASES[case])
    mechanism = tmp_path / "mechanism.json"
    mechanism.write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/mechanism/v1",
                "hypothesis": "attention halves",
                "expectations": [
                    {"target": "region", "name": "attention", "expect": "decrease"},
                    {"target": "counter", "name": "launches", "expect": "decrease"},
                    {"target": "region", "name": "sampling", "expect": "unchanged"},
                ],
            }
        )
    )
    common = ["--order-seed", "7", "-n", "6", "--mechanism-file", str(mechanism)]
    code, out, err = _run(["ab", a, b, *common], capsys)
    _check(f"ab-{case}-text", _normal(_document(code, out, err), tmp_path))
    junit, summary = tmp_path / "ab.xml", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["ab", a, b, *common, "--format", "markdown", "--junit", str(junit)]
    code, out, err = _run(args, capsys)
    files = {"junit": junit.read_text(), "job summary": summary.read_text()}
    _check(f"ab-{case}-markdown", _normal(_document(code, out, err, files), tmp_path))


@pytest.mark.slow
def test_round_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`campaign start`, a fixed round, a round --until-decided and `campaign final`."""
    folder = tmp_path / "attempts" / "rounds"
    start = ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
    code, out, err = _run([*start, "--interval", "sequential_t"], capsys)
    started = re.sub(r"policy_sha256 [0-9a-f]{64}", "policy_sha256 <digest>", out)
    _check("round-start", _normal(_document(code, started, err), tmp_path))
    labels = ["--baseline", "main", "--candidate", "half-attention", "--order-seed", "3"]
    commands = ["--baseline-cmd", _measured(tmp_path, 1.0)]
    commands += ["--candidate-cmd", _measured(tmp_path, 0.5)]
    code, out, err = _run(["round", str(folder), *labels, *commands, "-n", "6"], capsys)
    _check("round-fixed", _normal(_document(code, out, err), tmp_path))
    code, out, err = _run(["round", str(folder), *labels, *commands, "--until-decided"], capsys)
    _check("round-until-decided", _normal(_document(code, out, err), tmp_path))
    store = str(tmp_path / "store")
    code, out, err = _run(["campaign", "final", str(folder), "--store", store], capsys)
    _check("round-final", _normal(_document(code, out, err), tmp_path))
    confirm = ["--confirm", "--order-seed", "5", "-n", "6", "--format", "markdown"]
    code, out, err = _run(["campaign", "final", str(folder), "--store", store, *confirm], capsys)
    _check("round-confirm-markdown", _normal(_document(code, out, err), tmp_path))
    code, out, err = _run(["campaign", "final", str(folder), "--store", store], capsys)
    _check("round-confirmed", _normal(_document(code, out, err), tmp_path))
