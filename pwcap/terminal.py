"""Text from the wire, made safe to print on a terminal.

Topic names, subscriptions, error messages and client versions are chosen by whoever
sent the traffic: printed raw, their control characters could move the cursor, rewrite
earlier lines or retitle the window. Everything pwcap prints that may hold such text
goes through :func:`terminal_text`, the one place that decides how.
"""

from __future__ import annotations


def terminal_text(text: str) -> str:
    """``text`` with every character that is not printable (controls, escapes, format
    characters such as bidirectional overrides, line separators) shown as an escape
    (``\\x1b``, ``\\u202e``): what is printed is what was sent, and nothing else."""
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
