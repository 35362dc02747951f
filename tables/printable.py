"""Text from a capture, made safe to print: the one owner of what reaches a terminal.

Every name a capture carries (topics, subscriptions, producer and consumer names,
properties, client and server versions, error messages) is chosen by whoever put the
traffic on the wire. Printed raw, ``ESC[2J`` clears the operator's screen, an OSC
sequence ending in BEL retitles the window, a CR overwrites the start of the line and a
newline forges whole lines. :func:`printable` shows every character a terminal would
act on as a visible escape, as tshark does (``\\x1b``, ``\\r``, ``\\n``), and a backslash
as ``\\\\`` so that an escape can never be faked; the tables keep the exact text. Every
command prints wire text through it, piped or on a terminal.

It lives with the dataset contract because the Spark jobs print the dataset's names too and
may import nothing of pwcap but ``tables/``; the command line and the Spark decode print
through it as well.
"""

from __future__ import annotations

NAME_LIMIT = 120  # characters of one name printed before it is cut with an ellipsis
TEXT_LIMIT = 400  # of a longer text from the wire: a frame's info, an anomaly's detail
ELLIPSIS = "…"
_NAMED = {
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
}


def _escape(char: str) -> str:
    """One character as printed: itself, or its escape."""
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(value: object, limit: int | None = NAME_LIMIT) -> str:
    """``value`` as text safe on a terminal: no control, format or line-separating
    character left as is (Python's ``str.isprintable`` decides, so C1 controls such as
    CSI and Unicode's bidirectional overrides are escaped too), and at most ``limit``
    characters, escapes counted, cut with an ellipsis (never inside an escape)."""
    text = "" if value is None else str(value)
    if text.isprintable() and "\\" not in text:
        if limit is None or len(text) <= limit:
            return text
        return text[: limit - 1] + ELLIPSIS
    pieces: list[str] = []
    length = 0
    fits = 0  # pieces that fit before an ellipsis
    for char in text:
        piece = _escape(char)
        length += len(piece)
        if limit is not None and length > limit:
            return "".join(pieces[:fits]) + ELLIPSIS
        pieces.append(piece)
        if limit is None or length <= limit - 1:
            fits = len(pieces)
    return "".join(pieces)
