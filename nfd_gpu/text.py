"""Text as one safe line: what every line printed or logged goes through.

- Controls are written escaped: C0, DEL, C1, the line and paragraph separators.
- So are the bidirectional controls, Unicode's Bidi_Control: ALM, LRM, RLM, LRE..RLO, LRI..PDI.
- So a newline or a right-to-left override in a device name, a file or a rule can neither
  forge a line of output nor reorder one on a terminal.
"""

from __future__ import annotations

_ESCAPED = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, 0x2028, 0x2029,
            *range(0x202A, 0x202F), *range(0x2066, 0x206A)]  # fmt: skip
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_TABLE = {c: _NAMED.get(c) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _ESCAPED}


def shown(text: str) -> str:
    """Return ``text`` as one line safe to print: controls and bidi controls escaped.

    Examples: ``\\n``, ``\\x1b``, ``\\u202e``.
    """
    return text.translate(_TABLE)
