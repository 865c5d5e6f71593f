"""The command blocks of README.md and docs/*.md, read with their marks: which ones run as written
in the test suite, in what order, and what output the page shows for each command.

The convention (README.md, "Development"): an HTML comment right above a shell code block,

    <!-- doc-test: run -->                       runs as written; its shown output is compared
    <!-- doc-test: run, timed -->                its output comes from timed runs (see below)
    <!-- doc-test: run, exit 5 -->               the block's last command exits 5
    <!-- doc-test: run, head -->                 the output shown is the first lines only
    <!-- doc-test: run, output below -->         the next code block is the command's output
    <!-- doc-test: run, long -->                 minutes at its defaults: EXPLAIN_DOCS_LONG=1
    <!-- doc-test: run, files SRC... -->         the files named (relative to the repository;
                                                 SRC:DEST to rename, SRC:DIR/ into a folder)
                                                 are copied into the folder first: a small
                                                 real workload for a command that reads them
    <!-- doc-test: run, apart -->                runs in a fresh clone of its own (an example
                                                 that stands alone); the page's session goes on
                                                 without it
    <!-- doc-test: run, except CMD (why) -->     the block's commands starting with CMD are not
                                                 run (``make test`` is the test suite itself)
    <!-- doc-test: synopsis -->                  the form of a command: placeholders, not run
    <!-- doc-test: needs WHAT -->                needs a program, a machine or a file this
                                                 repository does not have (WHAT is named in
                                                 the block); not run

and, anywhere on a page, ``<!-- doc-test: setup: COMMAND -->``: the page assumes COMMAND was run
(e.g. the README's ``explain-pipeline ingest data/attempts``), so its session runs it there.

Every `run` block of a page runs in order in one folder that starts as a fresh clone of the
repository (a reader following the page in one shell at the repository root). A block whose
lines start with ``$ `` shows output: the lines up to the next ``$ `` are that command's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SHELL = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"^ *<!-- doc-test: (.*?) -->$", re.MULTILINE)
_PROGRAM = re.compile(
    r"(explain-pipeline|make|python3?|pip|nsys|ncu|msprof|ray|duckdb|git|\.venv/bin/\S+|\./\S+)"
)
KINDS = ("run", "synopsis", "needs")


class MarkError(ValueError):
    """A doc-test comment that does not follow the convention."""


@dataclass(frozen=True)
class Mark:
    """What a doc-test comment says about the block below it."""

    kind: str
    timed: bool = False
    exit: int = 0
    head: bool = False
    output_below: bool = False
    long: bool = False
    apart: bool = False
    files: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    needs: str = ""

    @staticmethod
    def parse(text: str) -> Mark:
        kind, _, rest = text.partition(" ")
        kind = kind.rstrip(",")
        if kind == "needs":
            if not rest.strip():
                raise MarkError("needs: say what the block needs")
            return Mark("needs", needs=rest.strip())
        if kind == "synopsis" and not rest:
            return Mark("synopsis")
        if kind != "run":
            raise MarkError(f"unknown kind {kind!r} (one of {', '.join(KINDS)}, or setup:)")
        options: dict[str, object] = {}
        for part in (p.strip() for p in rest.split(",") if p.strip()):
            word, _, value = part.partition(" ")
            if part in ("timed", "head", "long", "apart"):
                options[part] = True
            elif part == "output below":
                options["output_below"] = True
            elif word == "exit" and value.isdigit():
                options["exit"] = int(value)
            elif word == "files" and value:
                options["files"] = tuple(value.split())
            elif word == "except" and value.split("(")[0].strip():
                options["skip"] = (value.split("(")[0].strip(),)
            else:
                raise MarkError(f"unknown option {part!r}")
        return Mark("run", **options)  # type: ignore[arg-type]


@dataclass
class Command:
    """One command as a reader types it (continuation lines kept) and the output shown after
    it on the page (None: the page shows none)."""

    text: str
    shown: list[str] | None = None


@dataclass
class Block:
    """A shell code block with command lines, where it is and what its mark says."""

    page: Path
    line: int
    body: str
    mark: Mark | None
    commands: list[Command] = field(default_factory=list)
    output_below: str | None = None  # the text of the next code block

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


@dataclass(frozen=True)
class Setup:
    """A ``<!-- doc-test: setup: COMMAND -->`` comment."""

    page: Path
    line: int
    command: str


def is_command(line: str) -> bool:
    words = line.removeprefix("$ ").split()
    return bool(words) and _PROGRAM.fullmatch(words[0]) is not None


def split_commands(body: str) -> list[Command]:
    """The commands of a block. With ``$ `` prompts: each prompt starts a command (a trailing
    backslash continues it) and the lines after it, up to the next prompt, are its shown
    output. Without: a line starting with a program starts a command; indented lines and lines
    after a trailing backslash continue it; comment lines are left out."""
    lines = body.splitlines()
    commands: list[Command] = []
    if any(line.startswith("$ ") for line in lines):
        continuing = False
        for line in lines:
            if continuing:
                commands[-1].text += "\n" + line
            elif line.startswith("$ "):
                commands.append(Command(line[2:], []))
            elif commands and commands[-1].shown is not None:
                commands[-1].shown.append(line)
            continuing = line.rstrip().endswith("\\")
        return commands
    current: Command | None = None
    continuing = False
    for line in lines:
        stripped = line.strip()
        if current is not None and stripped and (continuing or line[:1].isspace()):
            current.text += "\n" + line
        elif is_command(line):
            current = Command(line)
            commands.append(current)
        else:
            current = None
        continuing = current is not None and line.rstrip().endswith(("\\", "&&", "|"))
    return commands


def _mark_above(text: str, start: int) -> tuple[str | None, int]:
    """The doc-test comment among the comment lines right above position ``start`` (blank lines
    and other HTML comments may stand between), and its line number."""
    lines = text[:start].splitlines()
    index = len(lines) - 1
    while index >= 0 and (not lines[index].strip() or lines[index].strip().startswith("<!--")):
        found = MARK.fullmatch(lines[index])
        if found and not found.group(1).startswith("setup:"):
            return found.group(1), index + 1
        index -= 1
    return None, 0


def read_page(page: Path) -> tuple[list[Block], list[Setup]]:
    """Every shell block with command lines, and every setup comment, in page order."""
    text = page.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    blocks = []
    for number, fence in enumerate(fences):
        if fence.group(2) not in SHELL:
            continue
        indent = len(fence.group(1))
        body = "\n".join(line[indent:] for line in fence.group(3).splitlines())
        commands = split_commands(body)
        if not commands:
            continue
        raw, _ = _mark_above(text, fence.start())
        try:
            mark = None if raw is None else Mark.parse(raw)
        except MarkError as exc:
            line = text[: fence.start()].count("\n")
            raise MarkError(f"{page.name}:{line}: <!-- doc-test: {raw} -->: {exc}") from None
        block = Block(page, text[: fence.start()].count("\n") + 1, body, mark, commands)
        if mark is not None and mark.output_below and number + 1 < len(fences):
            block.output_below = fences[number + 1].group(3)
        blocks.append(block)
    setups = [
        Setup(page, text[: m.start()].count("\n") + 1, m.group(1).removeprefix("setup:").strip())
        for m in MARK.finditer(text)
        if m.group(1).startswith("setup:")
    ]
    return blocks, setups


def steps(page: Path) -> list[Block | Setup]:
    """The page's blocks and setup comments in the order a reader meets them."""
    blocks, setups = read_page(page)
    ordered: list[Block | Setup] = [*blocks, *setups]
    return sorted(ordered, key=lambda s: s.line)


# -- what a mark must be true to ------------------------------------------------------------------
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'|\s#\s.*$", re.MULTILINE)  # and comments
_PLACEHOLDER = re.compile(r"\[|\.\.\.|…|(?<![\w./$-])[A-Z][A-Z0-9_]+(?![\w./=-])")


def placeholders(block: Block) -> list[str]:
    """Words of the block's commands (outside quotes and comments) that stand for something to
    fill in: ``CMD``, ``ID``, ``[--store PATH]``, ``...``."""
    found = []
    for command in block.commands:
        found += _PLACEHOLDER.findall(_QUOTED.sub("", command.text))
    return found


def mark_problems(block: Block) -> list[str]:
    """Why the block's mark is missing or does not fit the block (empty when it fits)."""
    mark = block.mark
    if mark is None:
        return [f"{block.where}: a command block without <!-- doc-test: ... --> above it"]
    if mark.kind == "synopsis" and not placeholders(block):
        return [f"{block.where}: marked synopsis but has no placeholder: it can run (mark run)"]
    if mark.kind == "needs" and mark.needs.split()[0].rstrip(",:") not in block.body:
        return [f"{block.where}: marked needs {mark.needs!r}, which the block does not name"]
    if mark.kind == "run" and placeholders(block):
        return [f"{block.where}: marked run but has placeholders {placeholders(block)}"]
    return []
