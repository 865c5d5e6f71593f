"""Free text from files is inert at every output (issue 27): no name, label, reason or message
read from a file can make a line of the terminal, CSV, JUnit, Markdown or runs.log that a
GitHub Actions runner executes as a workflow command, nor a mention or a link in Markdown.

The reference is a plain port of how the runner finds commands (actions/runner,
ActionCommand.TryParseV2 and TryParse): in every line (split at CR and LF), ``::name …::`` after
the line's leading blanks, or ``##[name …]`` anywhere in it."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.contract.inert import inert, inert_output, printable
from pipeline.output.markdown import md

EXPLAIN = [sys.executable, "-m", "pipeline"]
REGISTERED = {
    "error",
    "warning",
    "notice",
    "debug",
    "add-mask",
    "stop-commands",
    "group",
    "endgroup",
    "set-output",
    "save-state",
    "add-matcher",
    "remove-matcher",
    "echo",
    "add-path",
    "set-env",
}
"""The runner's registered commands (a `stop-commands` token becomes one too)."""

HOSTILE = [
    "x\n::error::injected",
    "y\r::add-mask::secret",
    "::stop-commands::tok",
    "  ::warning::indented",
    "a ##[error]legacy form",
    "z\u2028::notice::separator",
    "w\x85::debug::nel",
    "v\x1b[31mred\x1b[0m",
    "##[stop-commands]tok2",
]
"""Names that start a workflow command wherever a raw line break or a line start puts them."""


def runner_commands(output: str, registered: set[str] = REGISTERED) -> list[str]:
    """The lines of ``output`` a GitHub Actions runner executes as workflow commands."""
    found = []
    for line in re.split(r"\r\n|\r|\n", output):
        trimmed = line.lstrip()
        if trimmed.startswith("::"):
            end = trimmed.find("::", 2)
            if end >= 0 and trimmed[2:end].split(" ")[0].lower() in registered:
                found.append(line)
                continue
        start = line.find("##[")
        close = line.find("]", start) if start >= 0 else -1
        if close >= 0 and line[start + 3 : close].split(" ")[0].lower() in registered:
            found.append(line)
    return found


def ours(line: str) -> bool:
    """The tool's own annotations: the only workflow commands it may print."""
    return re.match(r"::(error|notice|warning) title=explain-pipeline%3A ", line) is not None


# -- the rule ------------------------------------------------------------------------------------
def test_the_reference_finds_every_hostile_name_when_printed_raw() -> None:
    """The reference is not vacuous: each name, printed raw on its own line or after blanks,
    is a command."""
    executed = [n for n in HOSTILE if runner_commands(f"candidate: {n}\n") or runner_commands(n)]
    assert executed == [
        n for n in HOSTILE if "\u2028" not in n and "\x85" not in n and "\x1b" not in n
    ]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("template", ["{}", "  {}", "x {} y", "{}\n{}", "| {} |", ":{}"])
def test_an_inert_name_starts_no_command_wherever_it_is_placed(name: str, template: str) -> None:
    shown = template.format(inert(name), inert(name))
    assert runner_commands(shown) == []
    assert "\n" not in inert(name) and "\r" not in inert(name)
    assert not re.search("[\x00-\x1f\x7f-\x9f\u2028\u2029]", inert(name))


def test_inert_keeps_ordinary_text_and_is_idempotent() -> None:
    for text in ["attention", "a::b", "std::vector<int>", "# 1", "x [y]", "数据", "décodé"]:
        assert inert(text) == text
    for name in HOSTILE + ["\udcff", "::", "##["]:
        assert inert(inert(name)) == inert(name)
    assert inert("\udcffname") == "\\udcffname"  # a lone surrogate: valid UTF-8 once escaped
    assert inert("::x::y") == "\\x3a:x::y"
    assert inert("a ##[b]") == "a ##\\x5b" + "b]"
    assert printable("a\nb\x1b") == "a\\nb\\x1b"


def test_the_output_rule_breaks_line_starts_of_a_whole_text_and_json_keeps_its_data() -> None:
    text = "ok\n  ::error::x\r::warning::y\nz ##[add-mask]s\n"
    assert runner_commands(inert_output(text)) == []
    document = json.dumps({"name": "a ##[error]b"})
    assert json.loads(inert_output(document, json=True)) == {"name": "a ##[error]b"}
    assert "##[" not in inert_output(document, json=True)


# -- through the commands users run ---------------------------------------------------------------
def _campaign(root: Path, names: list[str]) -> Path:
    """A campaign of one attempt whose regions, counters, candidate label and hypothesis carry
    the hostile names, and one attempt folder ingest rejects (its name is a hostile text)."""
    from pipeline.contract.policy import POLICY_DEFAULTS, policy_sha256

    folder = root / "attempts" / "hostile"
    (folder / "r001").mkdir(parents=True)
    policy = dict(POLICY_DEFAULTS)
    (folder / "campaign.json").write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/campaign/v1",
                "campaign_id": "hostile",
                "kind": "project",
                "created_at": "2026-11-01T10:00:00Z",
                "metric": {"name": "seconds", "better": "lower"},
                "policy": policy,
                "policy_sha256": policy_sha256(policy),
            }
        )
    )
    (folder / "r001" / "attempt.json").write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/attempt/v1",
                "attempt_id": "r001",
                "round": 1,
                "candidate": "cand " + names[0],
                "baseline": names[1],
                "status": "completed",
                "started_at": "2026-11-01T12:00:00Z",
            }
        )
    )
    lines = []
    for rep in range(6):
        for side, scale in (("baseline", 1.0), ("candidate", 0.9)):
            breakdown = {n: 0.01 * scale * (1 + 0.01 * rep) for n in names}
            counters = {f"c {n}": 100 * scale for n in names}
            lines.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": 0.1 * scale * (1 + 0.01 * rep),
                    "breakdown": breakdown,
                    "counters": counters,
                }
            )
    (folder / "r001" / "measurements.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines)
    )
    bad = folder / "::warning::folder ##[error]x"
    bad.mkdir()
    (bad / "attempt.json").write_text("{}")
    return folder


def _github(args: list[str], summary: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(
        [*EXPLAIN, *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


@pytest.mark.slow
def test_assess_in_every_format_prints_no_command_but_its_own_annotations(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, HOSTILE)
    store = tmp_path / "store"
    done = _github(["ingest", str(folder.parent), "--store", str(store)], tmp_path / "s.md")
    assert done.returncode == 1, done.stderr  # the folder with the hostile name is rejected
    assert runner_commands(done.stdout + done.stderr) == []
    junit = tmp_path / "verdicts.xml"
    for fmt in ("table", "csv", "json", "markdown"):
        args = ["assess", "hostile", "--store", str(store), "--format", fmt]
        done = _github([*args, "--junit", str(junit)], tmp_path / "summary.md")
        assert done.returncode == 0, done.stderr
        found = runner_commands(done.stdout) + runner_commands(done.stderr)
        assert [line for line in found if not ours(line)] == [], fmt
        assert len([line for line in found if ours(line)]) == 2  # the verdict, the rejection
        assert runner_commands(junit.read_text()) == []
        ET.parse(junit)  # still well-formed XML
        if fmt == "csv":
            rows = list(csv.reader(io.StringIO(done.stdout)))
            assert len(rows) == 2 and not any("\n" in c or "\r" in c for c in rows[1])
            assert rows[1][rows[0].index("candidate")] == inert("cand " + HOSTILE[0])
        if fmt == "json":  # JSON keeps the names as they are: its own escapes make them inert
            attempt = json.loads(done.stdout)["campaigns"][0]["attempts"][0]
            names = {c["name"] for c in attempt["comparisons"]}
            assert set(HOSTILE) <= names
    assert runner_commands((tmp_path / "summary.md").read_text()) == []


def test_markdown_through_a_github_flavoured_renderer_has_no_mention_or_link() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    names = [
        "@octocat please",
        "@org/team",
        "see https://example.com/x and www.example.org",
        "mail a@b.com",
        "fixes #12",
        "<script>alert(1)</script> | ` [x](https://e.com)",
    ]
    table = "| name |\n|---|\n" + "".join(f"| {md(n)} |\n" for n in names)
    html = cmarkgfm.github_flavored_markdown_to_html(table, options=Options.CMARK_OPT_UNSAFE)
    assert "<a " not in html and "<script" not in html
    cells = re.findall(r"<td>(.*?)</td>", html, flags=re.S)
    assert len(cells) == len(names)  # no row broken, no cell added
    assert not re.search(r"@\w", html)  # a mention needs a word character right after the @
    assert not re.search(r"#\d", html)  # an issue reference, a digit right after the #
    shown = [c.replace("\u200d", "").replace("&lt;", "<").replace("&gt;", ">") for c in cells]
    assert shown == [n.replace("&", "&amp;") if "<" not in n else n for n in names][:5] + [
        "<script>alert(1)</script> | ` [x](https://e.com)"
    ]


def test_the_summary_line_is_escaped_as_html_not_markdown(tmp_path: Path) -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    from pipeline.output.markdown import html_text

    name = "fuse_rms *x* <T> @dev"
    block = f"<details><summary>{html_text(name)}</summary>\n\n| a |\n|---|\n| b |\n\n</details>\n"
    html = cmarkgfm.github_flavored_markdown_to_html(block, options=Options.CMARK_OPT_UNSAFE)
    summary = re.search(r"<summary>(.*?)</summary>", html)
    assert summary is not None
    assert summary.group(1).replace("\u200d", "") == "fuse_rms *x* &lt;T&gt; @dev"
    assert "\\" not in summary.group(1)


@pytest.mark.slow
def test_ab_and_runs_log_are_inert_with_hostile_names_from_a_real_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that writes hostile region and counter names, and one whose measurement
    names hold a lone surrogate (the recorder crashed writing runs.log): ab prints its verdict
    and no command, and runs.log is valid UTF-8 with no command line."""
    script = tmp_path / "measure.py"
    script.write_text(
        "import json, os, sys\n"
        f"names = {HOSTILE!r}\n"
        "t = float(sys.argv[1])\n"
        "doc = {'metric': t, 'breakdown': {n: t / len(names) for n in names},\n"
        "       'counters': {n: 7 for n in names}}\n"
        "open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write(json.dumps(doc))\n"
        "print('##[error]from stderr\\n::error::also', file=sys.stderr)\n"
        "sys.exit(0 if sys.argv[2] == 'ok' else 1)\n"
    )
    keep = tmp_path / "kept"
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "ab",
                f"{sys.executable} {script} 0.2 ok",
                f"{sys.executable} {script} 0.1 ok",
                "-n",
                "5",
                "--warmup",
                "1",
                "--keep",
                str(keep),
            ]
        )
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    assert "verdict: PASS" in out
    assert runner_commands(out + err) == []
    surrogate = tmp_path / "surrogate.py"
    surrogate.write_text(
        "import os, sys\n"
        "open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write("
        '\'{"metric": 1.0, "counters": {"\\\\udcff::error::x": -1}}\')\n'
        "print('##[error]from stderr\\n::error::also', file=sys.stderr)\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "ab",
                f"{sys.executable} {surrogate}",
                f"{sys.executable} {surrogate}",
                "-n",
                "5",
                "--warmup",
                "0",
                "--keep",
                str(tmp_path / "kept2"),
            ]
        )
    out, err = capsys.readouterr()
    assert exc.value.code == 6, err  # every run failed: its file is invalid
    assert runner_commands(out + err) == []
    log = next((tmp_path / "kept2").rglob("runs.log")).read_bytes().decode("utf-8")
    assert "\\udcff" in log
    assert runner_commands(log) == []


@pytest.mark.slow
def test_query_on_stdout_is_inert_and_a_file_keeps_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _campaign(tmp_path, HOSTILE)
    store = tmp_path / "store"
    with pytest.raises(SystemExit):
        main(["ingest", str(folder.parent), "--store", str(store)])
    capsys.readouterr()
    sql = "SELECT DISTINCT region FROM breakdown ORDER BY region"
    for fmt in ("table", "csv", "json"):
        with pytest.raises(SystemExit) as exc:
            main(["query", sql, "--store", str(store), "--format", fmt])
        out, err = capsys.readouterr()
        assert exc.value.code == 0, err
        assert runner_commands(out) == [], fmt
        if fmt == "json":  # the same data, its own escapes
            assert {r["region"] for r in json.loads(out)} == set(HOSTILE)
    written = tmp_path / "regions.csv"
    with pytest.raises(SystemExit):
        main(["query", sql, "--store", str(store), "--format", "csv", "-o", str(written)])
    with written.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert {r[0] for r in rows[1:]} == set(HOSTILE)  # a file is data: kept exactly


def test_store_check_shows_a_hostile_file_name_on_one_inert_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _campaign(tmp_path, ["attention", "main"])
    store = tmp_path / "store"
    with pytest.raises(SystemExit):
        main(["ingest", str(folder.parent), "--store", str(store)])
    odd = store / "samples" / "campaign_id=a\n::error::boom ##[add-mask]x"
    odd.mkdir()
    (odd / "data.parquet").write_text("not parquet")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["store", "check", "--store", str(store)])
    out, _ = capsys.readouterr()
    assert exc.value.code == 1
    assert runner_commands(out) == []
    assert len(out.splitlines()) == 2  # the problem on one line, then the summary


# -- format characters (Unicode category Cf) ------------------------------------------------------
BIDI = ["test_\u202etsaf_", "zero\u200bwidth", "iso\u2066late\u2069", "tag\U000e0041"]
"""Names holding format characters: U+202E (right-to-left override) makes `test_<RLO>tsaf_`
read `test__fast`; a zero-width space, an isolate, a tag character."""


def test_every_format_character_of_this_python_is_escaped() -> None:
    import unicodedata

    import polars as pl

    from pipeline.contract.inert import NEEDS_ESCAPE

    found = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert [c for c in found if printable(c) == c] == []
    assert printable("test_\u202etsaf_") == "test_\\u202etsaf_"
    assert printable("tag\U000e0041") == "tag\\U000e0041"
    assert all(unicodedata.category(c) != "Cf" for c in printable("".join(found)))
    flagged = pl.Series([f"a{c}b" for c in found]).str.contains(NEEDS_ESCAPE)
    assert flagged.all()  # the Polars rule flags the same characters
    assert not pl.Series(["數據", "décodé", "a::b"]).str.contains(NEEDS_ESCAPE).any()


def _raw_format(text: str) -> list[str]:
    import unicodedata

    return sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) == "Cf"})


@pytest.mark.slow
def test_format_characters_reach_no_output_raw(tmp_path: Path) -> None:
    """Every output of a campaign whose names hold bidirectional controls shows them as escapes:
    the terminal, CSV, Markdown, JUnit, the job summary, the annotations, the HTML report (JSON
    keeps the data; its own escapes write them as \\u202e)."""
    folder = _campaign(tmp_path, BIDI)
    store = tmp_path / "store"
    done = _github(["ingest", str(folder.parent), "--store", str(store)], tmp_path / "s.md")
    assert done.returncode == 1, done.stderr  # the hostile folder name is rejected, as above
    junit = tmp_path / "verdicts.xml"
    summary = tmp_path / "summary.md"
    for fmt in ("table", "csv", "json", "markdown"):
        args = ["assess", "hostile", "--store", str(store), "--format", fmt]
        done = _github([*args, "--junit", str(junit)], summary)
        assert done.returncode == 0, done.stderr
        assert _raw_format(done.stdout + done.stderr) == [], fmt
        assert _raw_format(junit.read_text()) == [], fmt
        assert "test_\\u202etsaf_" in (done.stdout if fmt != "json" else done.stdout.lower())
    # Markdown's own zero-width joiners (no mention, no link) are the only format characters
    assert _raw_format(summary.read_text().replace("\u200d", "")) == []
    assert "test\\_\\\\u202etsaf\\_" in summary.read_text()  # the backslash escaped too
    page = tmp_path / "report.html"
    done = _github(["report", "hostile", "--store", str(store), "-o", str(page)], summary)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "test_\\u202etsaf_" in html
    names = [n for n in BIDI if n in html]
    assert names == [], names
