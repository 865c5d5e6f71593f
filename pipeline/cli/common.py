"""What every command shares: the command class (its --help ends with the exit codes), the
--store, --format, --junit and -o/--output options."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.contract.declare import Bounds, DocumentKind, bounds, choices, spec
from pipeline.contract.policy import PolicyValue, policy_text
from pipeline.engines import ENGINES
from pipeline.errors import EXIT_CODES_HELP, PolicyError, UsageError
from pipeline.output import Shown, formats


class _ExitCodesEpilog:
    """Appends the exit codes to the command's own epilog, so every --help ends with them."""

    def __init__(self, *args: Any, epilog: str | None = None, **attrs: Any) -> None:
        if not epilog:
            epilog = EXIT_CODES_HELP
        elif EXIT_CODES_HELP not in epilog:
            epilog = f"{epilog}\n\n{EXIT_CODES_HELP}"
        super().__init__(*args, epilog=epilog, **attrs)  # type: ignore[call-arg]


class Command(_ExitCodesEpilog, click.Command):
    """Every command of the CLI: its --help ends with the exit codes."""


class Group(_ExitCodesEpilog, click.Group):
    """A group of commands; its subcommands and subgroups get the same classes."""

    command_class = Command
    group_class = type  # subgroups are Groups too


def command(name: str, **attrs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``@click.command`` with the shared Command class (use it for every new command)."""
    return click.command(name, cls=Command, **attrs)


def group(name: str, **attrs: Any) -> Callable[[Callable[..., Any]], Group]:
    """``@click.group`` with the shared Group class."""
    return click.group(name, cls=Group, **attrs)


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False),
    default=None,
    help="Store folder (default: $EXPLAIN_STORE, else ./.explain-store).",
)


def campaigns_chosen(all_help: str) -> Any:
    """CAMPAIGN_ID or --all, and --store: the campaigns of a store a command works on."""

    def decorate(command: Any) -> Any:
        command = store_option(command)
        command = click.option("--all", "all_campaigns", is_flag=True, help=all_help)(command)
        return click.argument("campaign_id", required=False)(command)

    return decorate


def format_option(*choices: str, default: str = "table") -> Any:
    """The one --format option: the first choices are the command's own (a command whose
    result pipeline.output renders takes ``result_format_option`` instead)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format.",
    )


def result_format_option(shows: Shown) -> Any:
    """--format of a command whose result is a ``shows``: the reporters of pipeline.output
    that can show it, in the registry's order, the first the default."""
    choices = formats(shows)
    return format_option(*choices, default=choices[0])


junit_option = click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write a JUnit XML report: one test case per attempt (failure = not PASS) and "
    "one per declared expectation (failure = contradicted). See docs/ci.md.",
)


def fail_on_option(when: str) -> Any:
    """``--fail-on`` of ab and assess --gate, its choices and default read from the gate's rule
    (pipeline.assessment.gate); ``when`` starts the help (``Exit 5``, ``With --gate: exit 5``)."""
    from pipeline.assessment.gate import DEFAULT_FAIL_ON, FAIL_ON

    return click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON),
        default=DEFAULT_FAIL_ON,
        show_default=True,
        help=f"{when} when the verdict is not PASS (not-improved), when any benchmark or the "
        "metric regressed (regression), or when anything moved (change).",
    )


def allow_removed_option(when: str) -> Any:
    """``--allow-removed`` beside ``--fail-on`` (ab, assess --gate): a benchmark the candidate
    no longer runs does not fail ``regression`` or ``change`` (pipeline.assessment.gate)."""
    return click.option(
        "--allow-removed",
        is_flag=True,
        default=False,
        help=f"{when}: a benchmark in the baseline's runs and in no candidate run (removed) "
        "does not fail --fail-on regression or change; without it, it does (a lost guard).",
    )


def engine_options(command: Any) -> Any:
    """--engine and --ray-address: where the per-campaign work runs (docs/scale-out.md)."""
    command = click.option(
        "--ray-address",
        "ray_address",
        metavar="ADDR",
        default=None,
        help="With --engine ray: the cluster to join (auto: the one started on this node with "
        "`ray start`; or HOST:6379); "
        "default: start a local cluster on this machine's cores.",
    )(command)
    return click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default="local",
        show_default=True,
        help="Run the per-campaign work in this process, or as Ray tasks (needs the ray "
        "extra: pip install 'explain-pipeline[ray]'); the results are the same.",
    )(command)


def output_option(help_text: str, *, dir_okay: bool = False, metavar: str | None = None) -> Any:
    """The one -o/--output option; ``-`` means stdout wherever a file is written."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Path(dir_okay=dir_okay, allow_dash=True),
        default=None,
        metavar=metavar or ("DIR" if dir_okay else "FILE"),
        help=f"{help_text} `-` writes to stdout.",
    )


def declared_range(kind: DocumentKind, *path: str) -> Any:
    """The click range of a field: the bounds its schema declares, the ones ingest checks, so
    `--help` shows what will be accepted."""
    return click_range(bounds(kind, *path))


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that refuses nan and the infinities: nan compares false with both bounds,
    so click's range lets it through, and a document field (JSON) can only hold a finite
    number."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not math.isfinite(click.FLOAT.convert(value, param, ctx)):
            self.fail(f"must be a finite number, got {value!r}.", param, ctx)
        return super().convert(value, param, ctx)


def click_range(limits: Bounds) -> Any:
    """The click range of declared bounds (an IntRange when they are integers, else a range of
    finite numbers)."""
    low, high, low_open, high_open = limits.low, limits.high, limits.low_open, limits.high_open
    if limits.integer:
        low_int = None if low is None else int(low)
        high_int = None if high is None else int(high)
        return click.IntRange(low_int, high_int, min_open=low_open, max_open=high_open)
    return FiniteFloatRange(low, high, min_open=low_open, max_open=high_open)


def declared_choice(kind: DocumentKind, *path: str) -> click.Choice:
    """The values a field's schema allows, as a click choice."""
    return click.Choice(choices(kind, *path))


def option_group(
    name: str, options: Sequence[Callable[[Any], Any]], build: Callable[..., Any]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Options parsed once: the click ``options`` reach the command as one argument ``name``,
    ``build(**their values)`` (an options object such as RunOptions), never one by one."""

    def probe() -> None: ...

    for option in options:
        option(probe)
    names = [param.name for param in probe.__click_params__]  # type: ignore[attr-defined]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in names}
            return function(*args, **{name: build(**given)}, **kwargs)

        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate


# -- --what-if KEY=VALUE --------------------------------------------------------------------------
def parse_what_if(
    context: click.Context | None, param: click.Parameter | None, items: Sequence[str]
) -> dict[str, PolicyValue]:
    """``--what-if KEY=VALUE``s -> policy overrides, each text read as its field's declared type
    (the library checks the values, with the rules campaign.json is checked by)."""
    typed: dict[str, PolicyValue] = {}
    for item in items:
        key, sep, text = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise UsageError(f"--what-if {item!r}: expected KEY=VALUE, e.g. decision=paired")
        typed[key] = _as_declared(key, text)
    return typed


_READERS: dict[str, tuple[Callable[[str], PolicyValue], str]] = {
    "boolean": ({"true": True, "false": False}.__getitem__, "true or false"),
    "integer": (int, "an integer"),
    "number": (float, "a number"),
}


def _as_declared(key: str, text: str) -> PolicyValue:
    declared = spec("campaign", "policy")["properties"].get(key, {}).get("type")
    if declared not in _READERS:
        return text  # a choice, or a field the library does not know: it says which
    read, what = _READERS[declared]
    try:
        return read(text.lower() if declared == "boolean" else text)
    except (KeyError, ValueError):
        raise UsageError(f"--what-if {key}={text}: expected {what}") from None


def what_if_option(help_text: str) -> Any:
    """The one --what-if option: repeatable ``KEY=VALUE``s, parsed into policy overrides."""
    return click.option(
        "--what-if",
        "what_if",
        multiple=True,
        metavar="KEY=VALUE",
        callback=parse_what_if,
        help=help_text,
    )


@contextlib.contextmanager
def what_if_named() -> Iterator[None]:
    """The library's PolicyError in the command line's words: ``--what-if KEY=VALUE: reason``."""
    try:
        yield
    except PolicyError as exc:
        shown = policy_text(exc.value)  # type: ignore[arg-type]
        raise UsageError(f"--what-if {exc.field}={shown}: {exc.reason}") from None
