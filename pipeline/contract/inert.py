"""The one rule that makes free text from files inert wherever the tool shows it: one line of
valid UTF-8 that no terminal, CSV reader or CI runner reads as anything but text.

Names, labels, reasons and messages come from files a benchmark, a profiler or a harness wrote,
and CI logs are read by a machine: a GitHub Actions runner executes every line of a step's
output that starts, after blanks, with ``::`` (``::error::``, ``::add-mask::``,
``::stop-commands::``, which would silence the tool's own verdict annotation), and also the
older form ``##[command]`` anywhere in a line. So text shown to a person is:

- ``printable``: control characters (C0, DEL, C1), the Unicode line and paragraph separators,
  the format characters (category Cf: the bidirectional controls that make ``test_<U+202E>tsaf_``
  read ``test__fast``, zero-width spaces and joiners, the byte order mark) and lone surrogates
  (the undecodable bytes of a file name) written as escapes ``\\n``, ``\\x1b``, ``\\u202e``,
  ``\\udcff``: one line that reads as it is stored, whatever a file held;
- ``inert``: printable, and the two command markers broken: a leading ``::`` as ``\\x3a:``,
  ``##[`` as ``##\\x5b``.

``inert_output`` applies the marker rule to a whole rendered output (the sink's last step), so a
line our own templates start with a value can begin no command either. JSON escapes its strings
itself and takes ``##\\u005b`` (the same string once decoded).
"""

from __future__ import annotations

import re

FORMAT_CHARACTERS = (
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
"""Unicode's format characters (general category Cf, Unicode 15), as ranges: written here
rather than computed from unicodedata at import (a scan of every code point costs 0.2 s of
every command); tests/test_inert_output.py checks it covers this Python's category Cf."""


def _ranges(form: str) -> str:
    return "".join(
        form.format(low) if low == high else form.format(low) + "-" + form.format(high)
        for low, high in FORMAT_CHARACTERS
    )


_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + _ranges("\\U{:08x}") + "]"
)
_FORMAT = re.compile("[" + _ranges("\\U{:08x}") + "]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LEADING_COMMAND = re.compile(r"(?:^|(?<=[\r\n]))(\s*)::")
"""``::`` at the start of a line after blanks (the runner trims them: .NET's TrimStart)."""
LEGACY_COMMAND = "##["

NEEDS_ESCAPE = r"[\x00-\x1f\x7f-\x9f\u{2028}\u{2029}" + _ranges("\\x{{{:x}}}") + r"]|##\[|^\s*::"
"""The same rule as a Polars (Rust) regex: which values ``inert`` changes (Polars strings are
valid UTF-8, so they hold no lone surrogate)."""


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """One line of valid UTF-8 whatever a file or folder name holds: control characters, line
    separators, format characters (Cf) and lone surrogates (also those standing for undecodable
    bytes of a file name) are written as escapes (``\\n``, ``\\x1b``, ``\\u202e``,
    ``\\udcff``)."""
    return _UNPRINTABLE.sub(_escape, text)


def format_escaped(text: str) -> str:
    """Only the format characters (Cf) written as escapes: for text laid out by a page (the HTML
    report's names and hypothesis), where HTML escaping does the rest and a line break is the
    page's to show, but a bidirectional control would still reorder what a reader sees."""
    return _FORMAT.sub(_escape, text)


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
