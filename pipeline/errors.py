"""Library errors and the exit codes the CLI turns them into (documented in README and --help)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    REJECTED = 1  # some input was rejected (ingest) or a file could not be read
    USAGE = 2  # bad option, unknown campaign, bad SQL
    INTEGRITY = 3  # a campaign is blocked by an integrity error (contract §6)
    INTERNAL = 4  # a bug: an unexpected error, reported without a traceback unless --debug
    NOT_PASS = 5  # the gated verdict is not PASS (assess --gate, ab)
    ROUND_FAILED = 6  # round, ab: the recorded attempt is failed (no usable pair; see runs.log)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (a round is left as an aborted attempt)


EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 some input rejected; 2 usage error (bad option, unknown "
    "campaign, bad query); 3 integrity error (a campaign is blocked); 4 internal error; "
    "5 the gated verdict is not PASS (assess --gate, ab); 6 the recorded round failed (round, "
    "ab, campaign final --confirm: no usable pair, see its runs.log); 130 interrupted."
)


class ExplainError(Exception):
    """An error the user can act on; the CLI prints its message and exits with its code."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(ExplainError):
    exit_code = ExitCode.USAGE


class StoreError(ExplainError):
    """The store cannot be read or written (permissions, a damaged file)."""

    exit_code = ExitCode.REJECTED


class PolicyError(UsageError):
    """A policy override (what-if) the contract refuses, in the library's words: the field, the
    value given and the reason. The command line names its own option in front."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f'policy field "{field}": {reason}')
        self.field, self.value, self.reason = field, value, reason


def refuse_first(rules: Iterable[tuple[str, bool, str]]) -> None:
    """UsageError ``<option>: <problem>`` for the first rule ``(option, ok, problem)`` not ok:
    the studies check their options as such lists, in the order the user reads them."""
    for option, ok, problem in rules:
        if not ok:
            raise UsageError(f"{option}: {problem}")
