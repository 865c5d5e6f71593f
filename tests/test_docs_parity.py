"""Each English page and its Chinese page say the same thing to a user who runs them: the same
command lines in their code blocks, the same options named, the same section structure. The
prose is free (natural Chinese, not a word-for-word copy); these three are what drift first."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from test_docs import ROOT, chinese_page, english_pages

_SHELL = {"", "bash", "sh", "shell", "console"}  # fences whose lines may be commands
# A fence, also one indented inside a list item (its lines then carry the same indent).
_ANY_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
# A command line starts with one of the programs a user of this repository runs.
_PROGRAM = re.compile(
    r"(explain-pipeline|make|python3?|pip|nsys|ncu|msprof|ray|duckdb|git|\.venv/bin/\S+|\./\S+)"
)
_COMMENT = re.compile(r"\s+#(\s.*)?$")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_HEADING = re.compile(r"^(#{1,6}) \S", re.MULTILINE)


def command_lines(text: str) -> list[str]:
    """The command lines of the shell code blocks, in order: a `$ ` prompt dropped, a trailing
    `# comment` dropped (comments are translated), continuation lines (after a `\\`, or indented
    under a command as in a synopsis) joined, spaces collapsed."""
    found: list[list[str]] = []
    for fence in _ANY_FENCE.finditer(text):
        if fence.group(2) not in _SHELL:
            continue
        current: list[str] | None = None
        joining = False
        indent = len(fence.group(1))
        for raw in (line[indent:] for line in fence.group(3).splitlines()):
            line = _COMMENT.sub("", raw.removeprefix("$ ")).rstrip()
            words = line.split()
            if words and _PROGRAM.fullmatch(words[0]) and not raw[:1].isspace():
                current = [line]
                found.append(current)
            elif current is not None and words and (joining or raw[:1].isspace()):
                current.append(line)
            else:
                current = None
            joining = current is not None and line.endswith("\\")
    return [" ".join(" ".join(p.removesuffix("\\") for p in parts).split()) for parts in found]


def options(text: str) -> set[str]:
    """Every long option named anywhere on the page, prose and code."""
    return set(_OPTION.findall(text))


def headings(text: str) -> list[int]:
    """The level of every heading, in order (headings inside code blocks are not headings)."""
    return [len(m.group(1)) for m in _HEADING.finditer(_ANY_FENCE.sub("", text))]


def parity_problems(english: str, chinese: str) -> list[str]:
    """What differs between the two pages, one line per difference (empty when they agree)."""
    problems = []
    en_cmds, zh_cmds = command_lines(english), command_lines(chinese)
    if en_cmds != zh_cmds:
        missing, extra = Counter(en_cmds) - Counter(zh_cmds), Counter(zh_cmds) - Counter(en_cmds)
        problems += [f"command only in English: {c}" for c in missing]
        problems += [f"command only in Chinese: {c}" for c in extra]
        if not missing and not extra:
            problems.append("the same command lines in another order")
    en_opts, zh_opts = options(english), options(chinese)
    problems += [f"option only in English: {o}" for o in sorted(en_opts - zh_opts)]
    problems += [f"option only in Chinese: {o}" for o in sorted(zh_opts - en_opts)]
    en_heads, zh_heads = headings(english), headings(chinese)
    if en_heads != zh_heads:
        problems.append(f"heading levels differ: English {en_heads}, Chinese {zh_heads}")
    else:
        problems += [
            f"section {n}: `{name}` only in English"
            for n, (en, zh) in enumerate(zip(names(english), names(chinese), strict=True))
            for name in sorted(en - zh)
        ]
    return problems


# A code span that is a name (a table, field, reason code, value, file, the number `001`) or a
# query: what a translation must keep, where prose and formulas may be rewritten in Chinese.
_NAME_SPAN = re.compile(r"`([A-Za-z0-9_][\w.]*|SELECT [^`\n]+)`")


def names(text: str) -> list[set[str]]:
    """Per section (split at every heading, code blocks left out): the names in code spans.
    Every one the English section names, the Chinese one names too (issue 28 found `rejections`,
    the conditions of too_few_pairs and no_reference_time, the timestamp forms and an example
    query missing from the Chinese pages)."""
    prose = _ANY_FENCE.sub("", text)
    return [set(_NAME_SPAN.findall(part)) for part in re.split(r"^#{1,6} .*$", prose, flags=re.M)]


def _pairs() -> list[tuple[Path, Path]]:
    return [(page, chinese_page(page)) for page in english_pages()]


@pytest.mark.parametrize("english,chinese", _pairs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_chinese_page_matches_its_english_page(english: Path, chinese: Path) -> None:
    problems = parity_problems(english.read_text("utf-8"), chinese.read_text("utf-8"))
    where = f"{chinese.relative_to(ROOT)} vs {english.relative_to(ROOT)}"
    assert not problems, where + ":\n" + "\n".join(problems)


# -- the checks themselves can fail ------------------------------------------------------------
def test_command_lines_join_continuations_and_drop_comments_and_output() -> None:
    page = (
        "```\n$ explain-pipeline round a --x 1 \\\n    --y 2   # one round\n"
        "round a: 10 pairs\nexplain-pipeline campaign start a --metric s\n"
        "    [--seed S]\nmake demo\n```\n```python\nexplain-pipeline = 1\n```\n"
        "- in a list:\n\n  ```\n  ray start --head   # on the head node\n  ```\n"
    )
    assert command_lines(page) == [
        "explain-pipeline round a --x 1 --y 2",
        "explain-pipeline campaign start a --metric s [--seed S]",
        "make demo",
        "ray start --head",
    ]
    fenced = "# a\n```\n# not a heading\n```\n## b\n- x\n  ```\n  # nor this\n  ```\n### c\n"
    assert headings(fenced) == [1, 2, 3]
    assert options("use `--gate` or --what-if k=v, not x--y or ---z") == {"--gate", "--what-if"}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """A temporary copy of a real page pair (the store page), to be broken on purpose."""
    english, chinese = ROOT / "docs" / "store.md", ROOT / "docs" / "zh" / "store.md"
    (tmp_path / "zh").mkdir()
    shutil.copy(english, tmp_path / "store.md")
    shutil.copy(chinese, tmp_path / "zh" / "store.md")
    return tmp_path / "store.md", tmp_path / "zh" / "store.md"


def _break(path: Path, old: str, new: str) -> str:
    text = path.read_text("utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), "utf-8")
    return text


def test_a_broken_pair_fails(pair: tuple[Path, Path]) -> None:
    english, chinese = pair
    original = chinese.read_text("utf-8")

    def problems_after(broken: str) -> list[str]:
        chinese.write_text(broken, "utf-8")
        return parity_problems(english.read_text("utf-8"), chinese.read_text("utf-8"))

    assert problems_after(original) == []
    command = command_lines(original)[0]
    first = next(ln for ln in original.splitlines() if ln and command.startswith(ln.strip()))
    extra = original.replace(first, first + " --extra", 1)
    assert f"command only in English: {command}" in problems_after(extra)
    heading = next(line for line in original.splitlines() if line.startswith("## "))
    demoted = problems_after(original.replace(heading, "#" + heading, 1))
    assert any(p.startswith("heading levels differ") for p in demoted), demoted
    option = sorted(options(original))[0]
    dropped = re.sub(re.escape(option) + r"(?![\w-])", "the option", original)
    assert f"option only in English: {option}" in problems_after(dropped)


# -- the command lines themselves -----------------------------------------------------------------
def _options_of(words: list[str]) -> tuple[str, set[str]]:
    """The subcommand that ``explain-pipeline WORDS`` runs and every option it accepts."""
    import click

    from pipeline.cli import cli

    command: click.Command = cli
    path = ["explain-pipeline"]
    for word in words:
        if not isinstance(command, click.Group):
            break
        sub = command.get_command(click.Context(command), word)
        if sub is None:
            break
        command, path = sub, [*path, word]
    accepted = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    return " ".join(path), accepted


def unknown_options(text: str) -> list[str]:
    """Options named in the page's explain-pipeline command lines that their command does not
    have (the options of a quoted command it runs, `--dtype` in `--candidate-cmd "python x.py
    --dtype f"`, are that program's)."""
    unknown = []
    for line in command_lines(text):
        for part in re.split(r"&&|\|", line):
            words = part.split()
            if words[:1] != ["explain-pipeline"]:
                continue
            path, accepted = _options_of(words[1:])
            unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", "", part)
            unknown += [f"{path} has no option {o}" for o in options(unquoted) - accepted]
    return sorted(unknown)


def test_unknown_options_are_found() -> None:
    page = (
        "```\nexplain-pipeline assess c1 --gate --attempt r1 --nope\n"
        'explain-pipeline round a --baseline-cmd "python x.py --dtype f" --colour\n```\n'
    )
    assert unknown_options(page) == [
        "explain-pipeline assess has no option --nope",
        "explain-pipeline round has no option --colour",
    ]


def test_every_option_of_a_documented_command_line_exists() -> None:
    found = [
        f"{page.relative_to(ROOT)}: {problem}"
        for pair in _pairs()
        for page in pair
        for problem in unknown_options(page.read_text("utf-8"))
    ]
    assert not found, "\n".join(found)
