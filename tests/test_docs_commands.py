"""Test what users run: every command block of README.md and docs/*.md carries a doc-test mark
(tests/docs_blocks.py says what each means), the Chinese twin marks its blocks alike, and every
block marked ``run`` runs as written, in page order, in a folder that starts as a fresh clone of
the repository, with the output the page shows checked: exactly, or, for output of timed runs,
with numbers and the words a timing draw decides (directions, outcomes) left free."""

from __future__ import annotations

import difflib
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from docs_blocks import (
    Block,
    Command,
    Mark,
    MarkError,
    Setup,
    mark_problems,
    read_page,
    split_commands,
    steps,
)
from test_docs import ROOT, chinese_page, english_pages

from pipeline.output.views import about

LONG = os.environ.get("EXPLAIN_DOCS_LONG") == "1"
"""Blocks marked ``long`` (minutes at their defaults) run only with EXPLAIN_DOCS_LONG=1."""
TIMEOUT, LONG_TIMEOUT = 300, 3600  # seconds per command
VERDICT = {0, 5}
"""Exit codes of a verdict (PASS, not PASS): in a timed block, a draw like the verdict itself."""


def all_pages() -> list[Path]:
    return [p for english in english_pages() for p in (english, chinese_page(english))]


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


# -- the marks -------------------------------------------------------------------------------------
def test_every_command_block_is_marked_and_fits_its_mark() -> None:
    problems = []
    for page in all_pages():
        try:
            blocks, _ = read_page(page)
        except MarkError as exc:
            problems.append(str(exc))
            continue
        found = [problem for block in blocks for problem in mark_problems(block)]
        problems += [f"{_rel(page)}:{p.split(':', 1)[1]}" for p in found]  # path, not name
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("english", english_pages(), ids=_rel)
def test_the_chinese_page_marks_its_blocks_alike(english: Path) -> None:
    def marks(page: Path) -> list[object]:
        return [s.command if isinstance(s, Setup) else s.mark for s in steps(page)]

    assert marks(chinese_page(english)) == marks(english)


# -- running a page --------------------------------------------------------------------------------
def fresh_clone(folder: Path) -> Path:
    """``folder`` as a fresh clone would be: the repository's tracked top-level entries (linked;
    data/ copied, since commands may write there) and this test run's virtual environment as
    .venv (what ``make .venv/bin/explain-pipeline`` would build)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=False
    )
    names = (
        {line.split("/")[0] for line in listed.stdout.splitlines()}
        if listed.stdout
        else {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    )
    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(names):
        source = ROOT / name
        if name == "data":
            shutil.copytree(source, folder / name, symlinks=True)
        elif source.exists():
            (folder / name).symlink_to(source)
    (folder / ".venv").symlink_to(Path(sys.prefix))
    stale = subprocess.run(["make", "-q", ".venv/bin/explain-pipeline"], cwd=folder, check=False)
    if stale.returncode != 0:  # a page's `make` would then rebuild the real .venv mid-test
        pytest.fail(f"{sys.prefix} is older than pyproject.toml: run make first")
    return folder


def user_environment(folder: Path) -> dict[str, str]:
    """The caller's environment with the clone's .venv activated, and nothing that would make a
    command write into this test run's CI job (GitHub's summary and annotations)."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "EXPLAIN_", "RUNNER_", "PYTEST_"))
        and k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
    }
    venv = folder / ".venv"
    return {
        **kept,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}:{kept.get('PATH', '')}",
        "EXPLAIN_CACHE_DIR": os.environ.get("EXPLAIN_CACHE_DIR", ""),  # this test run's
    }


@dataclass(frozen=True)
class Ran:
    code: int
    output: str


@dataclass
class Session:
    """One shell at the root of a fresh clone, as a reader following a page has."""

    folder: Path
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.env = user_environment(self.folder)

    def run(self, command: str, timeout: float) -> Ran:
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return Ran(-1, f"(timed out after {timeout} s)")
        return Ran(done.returncode, done.stdout)


# -- comparing output ------------------------------------------------------------------------------
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?|\binf\b)")
_DRAWN = re.compile(
    r"\b(?:none|decrease|increase|improved|regressed|confirmed|contradicted|unsupported|"
    r"consistent|unverifiable|explained|within_noise|below_gate|no order bias found|"
    r"order bias found|biased by run order|inconclusive|unchanged)\b"
)
_VERDICT = re.compile(r"\b(?:PASS|FAIL|INCONCLUSIVE)(?: \([a-z_]+\))?")
"""Words a timing draw decides, free in timed output: whether a region moved (a reference region
that did not change is 'none' in 95% of rounds, not all), whether the order effect's interval
excludes 1 (its reading: 'no order bias found' or 'biased by run order'), whether a counter
that is 0 in some runs reads inf, and a benchmark's verdict (inconclusive or unchanged as well).
A round's verdict and its reason (_VERDICT) too: the pages' timed rounds are real measurements
on whatever machine runs the suite (20% and more per pair under load), so a verdict they print
is what that machine drew. A test of a verdict uses a known effect (tests/README.md); the pages'
lines are checked to run, to exit with a verdict's code and to print all else they show."""

_EXPECTED = re.compile(r"\b(?:about|under) #")
"""An expected count as the campaign's accounting prints it: ``about 0.003`` or ``under 0.001``
(pipeline.output.views.about) is the measured spread's draw (seen in CI: docs/record.md's quick
start, ``at most under 0.001 rounds`` where the page shows ``about``)."""

_RUSAGE_FOLDED = re.compile(r"^(rusage\.\* \(# counters of each run\)): .*$")
"""The folded line of the rusage.* counters under a table of benchmarks names those that moved
('none moved' or 'moved: cpu_seconds ...'): a draw."""
_MEMBERS_HEAD = "pairs ratio [low, high] verdict"
"""The header of a table of benchmarks: its rows are sorted by the measured change, so their
order is a draw (they are compared sorted), and so is the count per verdict below them."""


def _members_in_any_order(lines: list[str]) -> list[str]:
    out = list(lines)
    for i, line in enumerate(lines):
        if line == _MEMBERS_HEAD:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("# ")), i + 1)
            out[i + 1 : end] = sorted(lines[i + 1 : end])
            if end < len(lines):
                out[end] = "# ~ (the count per verdict)"
    return out


_PROGRESS = re.compile(r"^round \S+: (?:\d+ of \d+ runs, \d+ pairs, \d+ failed \(|look \d+ at )")
"""A round's progress lines on stderr (docs/record.md), which the page's command prints into
its output: a fixed round one every 30 s (and one when its runs end, if it printed one), a round
run until decided one per look. How many is the machine's speed (and the stop rule's draw), so a
timed block's output is compared without them; the pages show what the round prints on stdout."""

_ORDER_BIAS = re.compile(r"^ORDER BIAS \S+: pairs run baseline first differ from the others by ")
"""The warning under a table of rounds for a round whose order effect excludes 1: at 95 %
confidence about 1 round in 20 of identical order draws it, more on a loaded machine, where the
side that runs second is slowed by whatever started meanwhile. The rounds a timed page shows are
real ones, so whether each carries the line is a draw (seen on docs/record.md's confirmation
round in a quiet make test); a timed block's output is compared without it."""

_ZERO_COUNT = re.compile(r" - (zero_baseline|zero_candidate)$")
"""A counter of events that may not happen in a run (voluntary context switches, major page
faults) is 0 on one side in some rounds and not in others: no ratio there, by draw."""


def normalized(lines: list[str], timed: bool) -> list[str]:
    drawn_lines = (_PROGRESS, _ORDER_BIAS)
    out = [
        line.rstrip()
        for line in lines
        if not (timed and any(pattern.match(line) for pattern in drawn_lines))
    ]
    while out and not out[-1]:
        out.pop()
    if timed:
        out = [_VERDICT.sub("~", line) for line in out]
        out = [" ".join(_DRAWN.sub("~", _NUMBER.sub("#", line)).split()) for line in out]
        out = [_EXPECTED.sub("~ #", line) for line in out]
        out = [_ZERO_COUNT.sub(" # [#, #] ~", line) for line in out]
        out = _members_in_any_order([_RUSAGE_FOLDED.sub(r"\1: ~", line) for line in out])
    return out


def output_problem(shown: list[str], actual: str, mark: Mark) -> str | None:
    """A diff when the output the page shows is not what the command printed (None: it is)."""
    want = normalized(shown, mark.timed)
    got = normalized(actual.splitlines(), mark.timed)
    if mark.head:
        got = got[: len(want)]
    if want == got:
        return None
    diff = difflib.unified_diff(want, got, "shown on the page", "printed", lineterm="", n=1)
    return "\n".join(list(diff)[:40])


# -- one page --------------------------------------------------------------------------------------
def runnable(block: Block) -> bool:
    return block.mark is not None and block.mark.kind == "run" and (LONG or not block.mark.long)


def copy_files(block: Block, folder: Path) -> Ran:
    """The mark's ``files``: SRC (a file or a glob, relative to the repository) copied into the
    folder by name; SRC:DEST to a name of the page's choosing, SRC:DIR/ into a folder."""
    assert block.mark is not None
    for spec in block.mark.files:
        source, _, dest = spec.partition(":")
        found = sorted(ROOT.glob(source))
        assert found, f"{block.where}: files {source}: nothing there"
        for path in found:
            target = (
                folder / dest / path.name if dest.endswith("/") else folder / (dest or path.name)
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    return Ran(0, "")


Snapshots = dict[tuple[str, ...], tuple[Ran, Path]]
"""What a line of commands run from a fresh clone printed, and a copy of its folder after it."""


def same_command(text: str) -> str:
    """The command without its comments, continuations and alignment: two pages that show it
    differently run the same thing."""
    lines = (re.sub(r"\s+#(\s.*)?$", "", line).removesuffix("\\") for line in text.splitlines())
    return " ".join(" ".join(lines).split())


_RECORDS = re.compile(r"\bexplain-pipeline (?:round|ab)\b")
"""A command that records a round: the round keeps the absolute folder its commands ran in, and
`campaign final --confirm` runs them there again ("in the current folder" when it is the one it
runs in). A copy of the session's folder is another folder, so no snapshot is kept once a round
is recorded: a page that records rounds like an earlier one records its own (seen in CI: the
confirmation of docs/record.md's quick start, continued from a copy of README.md's, printed
README.md's folder and ran its commands there)."""


@dataclass
class Line:
    """A session that remembers its commands: a page that runs the same commands from a fresh
    clone as an earlier page (the set-up both quick starts begin with) takes their
    results and a copy of the folder they left, instead of running them again, up to its first
    recorded round (_RECORDS: README.md's and docs/record.md's quick starts record their own)."""

    folder: Path
    snapshots: Snapshots | None
    history: tuple[str, ...] = ()
    session: Session | None = None
    start: Path | None = None  # the snapshot to start from when a command really runs

    def run(self, command: str, timeout: float, action: Callable[[Path], Ran] | None = None) -> Ran:
        self.history = (*self.history, same_command(command))
        known = None if self.snapshots is None else self.snapshots.get(self.history)
        if known is not None and self.session is None:
            ran, self.start = known
            return ran
        if self.session is None:
            if self.start is None:
                fresh_clone(self.folder)
            else:
                shutil.copytree(self.start, self.folder, symlinks=True)
            self.session = Session(self.folder)
        ran = action(self.folder) if action else self.session.run(command, timeout)
        if self.snapshots is not None and not any(map(_RECORDS.search, self.history)):
            copy = self.folder.with_name(f"{self.folder.name}-{len(self.history)}")
            shutil.copytree(self.folder, copy, symlinks=True)
            self.snapshots[self.history] = (ran, copy)
        return ran


def run_page(
    page: Path, folder: Path, snapshots: Snapshots | None
) -> tuple[dict[tuple[int, int], Ran], list[str], bool]:
    """Every runnable block of ``page`` (and its setups) in order: the results by (block line,
    command index), what went wrong (an unexpected exit code stops the page), and whether it went
    wrong in a timed block. The page's session starts in a fresh clone; an ``apart`` block runs
    in a fresh clone of its own."""
    main = Line(folder / "page", snapshots)
    results: dict[tuple[int, int], Ran] = {}
    for step in steps(page):
        if isinstance(step, Setup):
            ran = main.run(step.command, TIMEOUT)
            if ran.code != 0:
                return results, [f"{_rel(page)}:{step.line}: setup {step.command}: {ran}"], False
            continue
        if not runnable(step):
            continue
        assert step.mark is not None
        line = Line(folder / f"apart-{step.line}", snapshots) if step.mark.apart else main
        if step.mark.files:
            line.run(f"files {step.mark.files}", 0, functools.partial(copy_files, step))
        timeout = LONG_TIMEOUT if step.mark.long else TIMEOUT
        for index, command in enumerate(step.commands):
            if command.text.startswith(step.mark.skip or ("\0",)):
                continue
            ran = line.run(command.text, timeout)
            results[step.line, index] = ran
            expected = step.mark.exit if index == len(step.commands) - 1 else 0
            if ran.code != expected and not (step.mark.timed and {ran.code, expected} <= VERDICT):
                tail = "\n".join(ran.output.splitlines()[-15:])
                return (
                    results,
                    [
                        f"{_rel(page)}:{step.line}: {command.text!r} exited {ran.code}, "
                        f"expected {expected}; it printed:\n{tail}"
                    ],
                    step.mark.timed,
                )
    return results, [], False


def shown_output(block: Block, index: int, command: Command) -> list[str] | None:
    if block.output_below is not None and index == len(block.commands) - 1:
        return block.output_below.splitlines()
    return command.shown or None


def compare_page(
    page: Path, english: Path, results: dict[tuple[int, int], Ran]
) -> Iterator[tuple[bool, str]]:
    """(timed, problem) for every shown output of ``page`` that its run (of ``english``, whose
    runnable blocks it has in the same order) did not print."""
    ours = [b for b in read_page(page)[0] if runnable(b)]
    theirs = [b for b in read_page(english)[0] if runnable(b)]
    for block, twin in zip(ours, theirs, strict=True):
        assert block.mark is not None
        for index, command in enumerate(block.commands):
            shown = shown_output(block, index, command)
            ran = results.get((twin.line, index))
            if shown is None or ran is None:
                continue
            problem = output_problem(shown, ran.output, block.mark)
            if problem:
                yield block.mark.timed, f"{_rel(page)}:{block.line}: {command.text!r}:\n{problem}"


def _runnable_pages() -> list[Path]:
    return [p for p in english_pages() if any(runnable(b) for b in read_page(p)[0])]


@pytest.fixture(scope="module")
def snapshots() -> Snapshots:
    return {}


@pytest.mark.slow
@pytest.mark.parametrize("english", _runnable_pages(), ids=_rel)
def test_the_page_runs_as_written(english: Path, tmp_path: Path, snapshots: Snapshots) -> None:
    """The page's runnable blocks, run once for both languages (their commands are the same:
    test_docs_parity.py), each page's shown outputs checked. A timed round's verdict is a draw
    (free in its output, and exit 0 or 5 alike), but a verdict the page does not show adds
    lines (a round that is not PASS prints the price of a gain; the quick start's A/A round is
    PASS in about 1 round of 100): when only timed output differs, the page runs once more, from
    scratch, and must match then. So it does when a command of a timed block exits with a code
    the page does not expect: a timed round that draws no PASS leaves `campaign final --confirm`
    nothing to confirm (exit 2; seen once with 4 test workers on 2 cores, the float32 gain of the
    quick start measured at +10 % with a spread of 0.11 per pair). A page fails when its second
    run, from scratch, fails too, and at once when an untimed block does."""
    problems = page_problems(english, [english, chinese_page(english)], tmp_path, snapshots)
    assert not problems, "\n\n".join(problems)


def page_problems(
    english: Path, pages: list[Path], folder: Path, snapshots: Snapshots | None
) -> list[str]:
    """What is wrong with ``pages`` (``english`` and its twins) when ``english`` runs, with a
    timed draw given a second run from scratch (test_the_page_runs_as_written). What the first
    run drew is kept in ``folder``/first-run.txt, and shown too when the second run fails: a
    draw that keeps coming is a page or an example to mend, not luck."""
    first: list[str] = []
    for attempt, shared in (("first", snapshots), ("again", None)):
        results, problems, timed_stop = run_page(english, folder / attempt, shared)
        if problems and not (timed_stop and attempt == "first"):
            return [*first, *problems]
        if not problems:
            found = [found for page in pages for found in compare_page(page, english, results)]
            problems = [problem for _, problem in found]
            if not found or any(not timed for timed, _ in found) or attempt == "again":
                return [*first, *problems] if problems else []
        first = [f"(the first run, from scratch before this one) {problem}" for problem in problems]
        (folder / "first-run.txt").write_text("\n\n".join(problems) + "\n", encoding="utf-8")
    raise AssertionError("unreachable: the second run returns")


# -- the harness itself can fail ------------------------------------------------------------------
def test_prompts_split_commands_from_their_output() -> None:
    body = "$ explain-pipeline x \\\n    --y 1\nline 1\n  line 2\n$ make demo\ndone\n"
    commands = split_commands(body)
    assert [c.text for c in commands] == ["explain-pipeline x \\\n    --y 1", "make demo"]
    assert [c.shown for c in commands] == [["line 1", "  line 2"], ["done"]]
    plain = (
        "make a   # one\nexplain-pipeline b \\\n  --c\n# a comment\nexplain-pipeline d &&\n  x\n"
    )
    assert [c.text for c in split_commands(plain)] == [
        "make a   # one",
        "explain-pipeline b \\\n  --c",
        "explain-pipeline d &&\n  x",
    ]
    assert all(c.shown is None for c in split_commands(plain))


def test_marks_parse_and_refuse_what_they_do_not_know() -> None:
    mark = Mark.parse("run, timed, exit 5, files a b:c/, except make test (why)")
    assert (mark.kind, mark.timed, mark.exit, mark.files, mark.skip) == (
        "run",
        True,
        5,
        ("a", "b:c/"),
        ("make test",),
    )
    assert Mark.parse("needs nsys: a GPU").needs == "nsys: a GPU"
    for bad in ("runs", "run, quick", "needs", "synopsis, timed", "run, exit x"):
        with pytest.raises(MarkError):
            Mark.parse(bad)


def test_a_mark_that_does_not_fit_its_block_is_found(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```\nexplain-pipeline ingest data/attempts\n```\n"
        "<!-- doc-test: synopsis -->\n```\nexplain-pipeline ingest data/attempts\n```\n"
        "<!-- doc-test: run -->\n```\nexplain-pipeline assess CAMPAIGN_ID [--all]\n```\n"
        "<!-- doc-test: needs nsys -->\n```\nexplain-pipeline query --list\n```\n"
        "<!-- doc-test: run -->\n<!-- other -->\n\n```\nexplain-pipeline query --list  # ALL\n```\n"
    )
    problems = [p for block in read_page(page)[0] for p in mark_problems(block)]
    assert problems == [
        "p.md:1: a command block without <!-- doc-test: ... --> above it",
        "p.md:5: marked synopsis but has no placeholder: it can run (mark run)",
        "p.md:9: marked run but has placeholders ['CAMPAIGN_ID', '[']",
        "p.md:13: marked needs 'nsys', which the block does not name",
    ]


def test_output_is_compared_exactly_or_with_the_timing_draw_left_free() -> None:
    shown = ["10 pairs, order seed 7", "  region matmul 2.27 [2.14, 2.41]   decrease", "PASS"]
    timed = Mark("run", timed=True)
    drawn = "10 pairs, order seed 99\n  region   matmul 1.9 [1.8, 2.0] none\nPASS\n\n"
    assert output_problem(shown, drawn, Mark("run", timed=True)) is None
    assert output_problem(shown, drawn, Mark("run")) is not None
    for changed in ("matmul", "mlp"), ("seed", "seeds"):
        problem = output_problem(shown, drawn.replace(*changed), Mark("run", timed=True))
        assert problem is not None and changed[1].split()[0] in problem
    failed = drawn.replace("PASS", "FAIL (within_noise)")
    assert output_problem(shown, failed, timed) is None  # a timed round's verdict: a draw
    assert output_problem(shown, failed, Mark("run", timed=False)) is not None
    assert output_problem(shown[:1], drawn, Mark("run", timed=True, head=True)) is None
    counted = ["  counter rusage.major_faults   -     zero_baseline"]
    assert output_problem(counted, "counter rusage.major_faults 1.0 [0.9, 1.1] none", timed) is None
    assert output_problem(shown[:1], drawn, Mark("run", timed=True)) is not None
    ticked = "round r001: 17 of 22 runs, 7 pairs, 0 failed (31 s)\n" + drawn
    ticked += "round r001: 22 of 22 runs, 10 pairs, 0 failed (38 s); done\n"
    assert output_problem(shown, ticked, timed) is None  # as many lines as the machine is slow
    looked = "round r001: look 1 at 12 pairs: benchmarks 3 improved; stop (decided)\n" + drawn
    assert output_problem(shown, looked, timed) is None
    assert output_problem(shown, ticked, Mark("run")) is not None
    table = [
        "benchmarks: 3 members",
        "  pairs  ratio [low, high]  verdict",
        "  metric s  10  1.1 [1.0, 1.2]  improved",
        "  t_a  10  1.0 [0.9, 1.1]  inconclusive",
        "  t_b  10  1.2 [1.1, 1.3]  improved",
        "  2 improved, 1 inconclusive",
        "rusage.* (8 counters of each run): none moved",
    ]
    redrawn = "\n".join(
        [
            *table[:3],
            table[4].replace("1.2", "0.8").replace("improved", "regressed"),
            table[3],
            "  1 regressed, 1 improved, 1 unchanged",
            "rusage.* (8 counters of each run): moved: cpu_seconds 0.9 [0.8, 0.95] increase",
        ]
    )
    assert output_problem(table, redrawn, timed) is None
    assert output_problem(table, redrawn.replace("t_a", "t_c"), timed) is not None
    assert output_problem(table, redrawn, Mark("run")) is not None
    ordered = [
        "order effect (A-first pairs vs B-first pairs): 1.01 [0.94, 1.08], no order bias found"
    ]
    biased = "order effect (A-first pairs vs B-first pairs): 1.2 [1.1, 1.3], biased by run order"
    assert output_problem(ordered, biased, timed) is None
    warned = "ORDER BIAS c003: pairs run baseline first differ from the others by x0.9 [0.8, 0.95]"
    rounds = ["3      c003     float32  10  PASS", "campaign accounting: 1 of 2 rounds PASS"]
    assert output_problem(rounds, "\n".join([rounds[0], warned, rounds[1]]), timed) is None
    assert (
        output_problem(rounds, "\n".join([rounds[0], warned, rounds[1]]), Mark("run")) is not None
    )
    switches = ["  counter rusage.involuntary_switches 1.1 [0.9, 1.3]   none"]
    assert (
        output_problem(switches, "counter rusage.involuntary_switches inf [2.0, inf] none", timed)
        is None
    )
    assert (
        output_problem(
            switches, "counter rusage.involuntary_switches inf [2.0, inf] none", Mark("run")
        )
        is not None
    )


def test_an_expected_count_is_a_draw_in_timed_output() -> None:
    """The accounting's expected PASSes of identical code come from the measured spread:
    ``about 0.003`` on one machine is ``under 0.001`` on another: free in timed output only."""
    line = "campaign accounting: 1 of 2 rounds PASS; identical code would PASS at most {} rounds"
    shown, drawn = (line.format(about(value)) for value in (0.003, 0.0004))
    assert "under" in drawn and "about" in shown
    assert output_problem([shown], drawn, Mark("run", timed=True)) is None
    assert output_problem([shown], drawn, Mark("run")) is not None
    assert output_problem([shown], drawn.replace("at most", "at least"), Mark("run", timed=True))


def test_no_snapshot_is_kept_once_a_round_is_recorded(tmp_path: Path) -> None:
    """A recorded round names the folder it ran in, so a later page does not continue from a
    copy of it; the commands before it are still shared."""
    snapshots: Snapshots = {}
    line = Line(tmp_path / "page", snapshots)

    def done(folder: Path) -> Ran:
        return Ran(0, str(folder))

    line.run("explain-pipeline campaign start attempts/x --metric s", 0, done)
    line.run("explain-pipeline round attempts/x --baseline a --candidate b", 0, done)
    line.run("explain-pipeline campaign final attempts/x", 0, done)
    assert list(snapshots) == [("explain-pipeline campaign start attempts/x --metric s",)]
    again = Line(tmp_path / "again", snapshots)
    started = again.run("explain-pipeline campaign start attempts/x --metric s", 0)
    assert started == Ran(0, str(line.folder))
    assert again.session is None  # taken from the snapshot, not run


def test_the_same_command_is_the_same_whatever_its_layout() -> None:
    assert same_command('explain-pipeline a \\\n    --x "p q" \\\n  --y 1   # why') == (
        'explain-pipeline a --x "p q" --y 1'
    )


@pytest.mark.parametrize(("mark", "code", "fails"), [("run, timed", 5, False), ("run", 5, True)])
def test_a_timed_block_exits_with_either_verdicts_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str, code: int, fails: bool
) -> None:
    """A timed round's verdict is a draw: its block may exit 0 or 5 whatever its mark says, but
    no other code, and an untimed block exactly as marked."""
    monkeypatch.setattr(sys.modules[__name__], "_rel", lambda page: page.name)  # not in the repo
    page = tmp_path / "p.md"
    for exit_code, expect_problem in ((code, fails), (6, True)):
        page.write_text(
            f"<!-- doc-test: {mark} -->\n```\nexplain-pipeline --version; exit {exit_code}\n```\n"
        )
        _, problems, timed_stop = run_page(page, tmp_path / f"run-{exit_code}", None)
        assert bool(problems) == expect_problem, problems
        assert timed_stop == (bool(problems) and "timed" in mark)
        if problems:
            assert f"exited {exit_code}, expected 0" in problems[0]


@pytest.mark.parametrize(("mark", "runs", "fails"), [("run, timed", 2, False), ("run", 1, True)])
def test_a_timed_block_that_fails_runs_once_more_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: str, runs: int, fails: bool
) -> None:
    """A timed block that exits with a code the page does not expect (its round drew no PASS)
    runs again from a fresh clone, and the page passes when that run does; an untimed block that
    fails fails the page at once."""
    monkeypatch.setattr(sys.modules[__name__], "_rel", lambda page: page.name)  # not in the repo
    count = tmp_path / "count"  # outside the clones: how many times the block ran
    page = tmp_path / "p.md"
    page.write_text(
        f"<!-- doc-test: {mark} -->\n```\n"
        "explain-pipeline --version > /dev/null; "
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; test $n -ge 1\n```\n"
    )
    problems = page_problems(page, [page], tmp_path / "runs", None)
    assert bool(problems) == fails, problems
    assert int(count.read_text()) == runs
    kept = tmp_path / "runs" / "first-run.txt"  # what the first run drew, kept
    assert kept.exists() == (runs == 2) and (runs == 1 or "exited 1" in kept.read_text())


def test_a_timed_block_that_fails_twice_fails_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "_rel", lambda page: page.name)
    page = tmp_path / "p.md"
    page.write_text("<!-- doc-test: run, timed -->\n```\nexplain-pipeline --version; exit 2\n```\n")
    problems = page_problems(page, [page], tmp_path / "runs", None)
    assert len(problems) == 2 and all("exited 2, expected 0" in p for p in problems), problems
    assert problems[0].startswith("(the first run, from scratch before this one) p.md:2: ")
    assert "exited 2, expected 0" in (tmp_path / "runs" / "first-run.txt").read_text()
