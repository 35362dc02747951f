"""Rotated captures: the files one tcpdump run wrote in turn, decoded as one timeline.

``tcpdump -C`` names its files ``trace.pcap``, ``trace.pcap1``, ``trace.pcap2``…, and with
``-W`` a ring ``trace.pcap0``… that wraps; a connection open when tcpdump rotates goes on
in the next file. Decoded apart, it would be two half-connections (the second without a
handshake, its frames cut at the file boundary). Grouped here, the files are read in the
order of their first timestamps as one capture, named like the first file without its
number. ``-G`` names (strftime) have no pattern to rely on: ``--series`` groups the
given files explicitly.

The paths may be local (:class:`~pathlib.Path`) or of any filesystem (``jobs/decode.py``
lists S3 or HDFS ones as :class:`~pathlib.PurePosixPath`): whoever groups them says how
to read a file's first timestamp.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import PurePath
from typing import TypeVar

from ..capture import CaptureError, iter_records

SNIFF_BYTES = 4096
_ROTATED = re.compile(r"(?P<base>.+\.[A-Za-z]+)(?P<number>\d+)")  # trace.pcap12

P = TypeVar("P", bound=PurePath)


def head_timestamp(head: bytes, name: str) -> int:
    """The capture time of the first record in a file's first bytes ``head`` (0 when
    they hold none)."""
    try:
        for ts, *_ in iter_records(io.BytesIO(head), name):
            return ts
    except CaptureError:
        pass
    return 0


def first_timestamp(path: PurePath) -> int:
    """The capture time of a local file's first record (0 when it has none)."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return 0
    return head_timestamp(head, path.name)


def rotated_groups(paths: list[P], first: Callable[[P], int] = first_timestamp) -> list[list[P]]:
    """The paths grouped by rotation: ``trace.pcap`` with ``trace.pcap1``… of the same
    folder form one group (in time order, ``first`` telling a file's first timestamp),
    every other path a group of its own; groups keep the order of their first member."""
    members: dict[tuple[PurePath, str], list[P]] = defaultdict(list)
    keys = []
    for path in paths:
        match = _ROTATED.fullmatch(path.name)
        key = (path.parent, match["base"] if match else path.name)
        if key not in members:
            keys.append(key)
        members[key].append(path)
    groups = []
    for key in keys:
        found = members[key]
        numbered = any(_ROTATED.fullmatch(p.name) for p in found)
        if len(found) > 1 and numbered:
            groups.append(in_time_order(found, first))
        else:
            groups += [[path] for path in found]
    return groups


def in_time_order(paths: list[P], first: Callable[[P], int] = first_timestamp) -> list[P]:
    """The files by the time of their first record (a ring of ``-W`` files wraps its
    numbers), the number breaking ties."""
    return sorted(paths, key=lambda p: (first(p), _number(p)))


def series_name(name: str) -> str:
    """The dataset name of a series: its first file's, without the rotation number."""
    match = _ROTATED.fullmatch(name)
    return match["base"] if match else name


def _number(path: PurePath) -> int:
    match = _ROTATED.fullmatch(path.name)
    return int(match["number"]) if match else -1
