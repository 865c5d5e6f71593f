"""The one rule that makes free text from files inert wherever the tool shows it: one line of
valid UTF-8 that no terminal, CSV reader or CI runner reads as anything but text.

Names, labels, reasons and messages come from files a benchmark, a profiler or a harness wrote,
and CI logs are read by a machine: a GitHub Actions runner executes every line of a step's
output that starts, after blanks, with ``::`` (``::error::``, ``::add-mask::``,
``::stop-commands::``, which would silence the tool's own verdict annotation), and also the
older form ``##[command]`` anywhere in a line. So text shown to a person is:

- ``printable``: control characters (C0, DEL, C1), the Unicode line and paragraph separators
  and lone surrogates (the undecodable bytes of a file name) written as escapes ``\\n``,
  ``\\x1b``, ``\\udcff``: one line, whatever a file held;
- ``inert``: printable, and the two command markers broken: a leading ``::`` as ``\\x3a:``,
  ``##[`` as ``##\\x5b``.

``inert_output`` applies the marker rule to a whole rendered output (the sink's last step), so a
line our own templates start with a value can begin no command either. JSON escapes its strings
itself and takes ``##\\u005b`` (the same string once decoded).
"""

from __future__ import annotations

import re

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LEADING_COMMAND = re.compile(r"(?:^|(?<=[\r\n]))(\s*)::")
"""``::`` at the start of a line after blanks (the runner trims them: .NET's TrimStart)."""
LEGACY_COMMAND = "##["

NEEDS_ESCAPE = r"[\x00-\x1f\x7f-\x9f\u{2028}\u{2029}]|##\[|^\s*::"
"""The same rule as a Polars (Rust) regex: which values ``inert`` changes (Polars strings are
valid UTF-8, so they hold no lone surrogate)."""


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def printable(text: str) -> str:
    """One line of valid UTF-8 whatever a file or folder name holds: control characters, line
    separators and lone surrogates (also those standing for undecodable bytes of a file name)
    are written as escapes (``\\n``, ``\\x1b``, ``\\udcff``)."""
    return _UNPRINTABLE.sub(_escape, text)


def inert_output(text: str, *, json: bool = False) -> str:
    """A rendered output (many lines) in which no line starts a CI workflow command: ``::``
    after a line's blanks becomes ``\\x3a:``, ``##[`` becomes ``##\\x5b`` (``json``:
    ``##\\u005b``, a JSON escape of the same character)."""
    if json:
        return text.replace(LEGACY_COMMAND, "##\\u005b")
    text = text.replace(LEGACY_COMMAND, "##\\x5b")
    return _LEADING_COMMAND.sub(lambda m: m.group(1) + "\\x3a:", text)


def inert(text: str) -> str:
    """Free text from a file as the tool shows it: printable, and unable to start a workflow
    command wherever it is placed (see the module docstring)."""
    return inert_output(printable(text))


def inert_lines(text: str) -> str:
    """A message of several lines we composed (each may quote a name or a file's text): each
    line inert, the line breaks between them kept."""
    return "\n".join(inert(line) for line in text.split("\n"))
