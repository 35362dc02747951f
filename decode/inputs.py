"""What a run decodes: the command line's files, folders, globs and ``-`` made into a list
of captures, each with the name its rows carry in the dataset's ``capture`` column.

A capture is recognised by its content, not its name: tcpdump's rotations (``trace.pcap1``
from ``-C``, strftime names from ``-G``) have no usual extension. Files of a folder that
are not captures are skipped and listed with the reason, never silently dropped.
"""

from __future__ import annotations

import glob
import io
import os
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO

from ..capture import CaptureError
from ..capture.records import iter_records
from .series import in_time_order, rotated_groups, series_name

STDIN = "-"
SNIFF_BYTES = 4096  # enough to see a capture's magic, even inside gzip


class InputError(Exception):
    """Unusable input: a missing file, nothing matched, or a file that is not a capture."""


@dataclass(frozen=True, slots=True)
class CaptureInput:
    """One capture to decode. ``name`` is its path relative to the argument that named
    it (a folder's files keep their sub-folders: ``host1/trace.pcap``), so captures of
    the same file name from different places stay apart."""

    name: str
    path: Path | None  # None: standard input; a rotated series: its first file
    size: int  # bytes, 0 when unknown (a pipe)
    parts: tuple[Path, ...] = ()  # a rotated series: its files, read in turn as one

    def source(self) -> str | BinaryIO | list[str]:
        if self.parts:
            return [str(part) for part in self.parts]
        return sys.stdin.buffer if self.path is None else str(self.path)

    @property
    def shown(self) -> str:
        """How messages name it: the path the user can find, or ``-``."""
        return STDIN if self.path is None else str(self.path)


@dataclass(frozen=True, slots=True)
class Inputs:
    captures: list[CaptureInput]
    skipped: list[tuple[Path, str]]  # files of a folder that are not captures, and why


def expand_inputs(arguments: Iterable[str], series: bool = False) -> Inputs:
    """Files as given, folders as the captures inside them, globs as what they match;
    tcpdump's rotated files (or all of them: ``series``) as one capture each series."""
    arguments = list(arguments)
    found: list[tuple[Path, PurePosixPath]] = []  # (path, name relative to its argument)
    skipped: list[tuple[Path, str]] = []
    for argument in arguments:
        if argument != STDIN:
            found += _expand(argument, skipped)
    unique: dict[Path, tuple[Path, PurePosixPath]] = {}  # a file named twice is decoded once
    for path, name in found:
        unique.setdefault(path.resolve(), (path, name))
    names = distinct_names([name for _, name in unique.values()], list(unique))
    named = {path: name for (path, _), name in zip(unique.values(), names, strict=True)}
    paths = list(named)
    groups = [in_time_order(paths)] if series and paths else rotated_groups(paths)
    captures = [_capture(group, named) for group in groups]
    if STDIN in arguments:
        captures.append(CaptureInput(STDIN, None, 0))
    if not captures:
        raise InputError("no input captures given")
    return Inputs(captures, skipped)


def _capture(group: list[Path], names: dict[Path, str]) -> CaptureInput:
    """One file, or a series of them under the name of its first."""
    first = group[0]
    if len(group) == 1:
        return CaptureInput(names[first], first, first.stat().st_size)
    size = sum(path.stat().st_size for path in group)
    return CaptureInput(series_name(names[first]), first, size, tuple(group))


def _expand(argument: str, skipped: list[tuple[Path, str]]) -> list[tuple[Path, PurePosixPath]]:
    """The files one argument names, each with its name below the argument; a folder's
    files that are not captures go to ``skipped``."""
    path = Path(argument)
    if glob.has_magic(argument):
        base = _literal_base(argument)
        files = [p for p in sorted(map(Path, glob.glob(argument, recursive=True))) if p.is_file()]
        if not files:
            raise InputError(f"{argument}: no file matches")
        return [(p, _relative(p, base)) for p in files]
    if path.is_dir():
        captures = []
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            reason = not_a_capture(file)
            if reason is None:
                captures.append((file, _relative(file, path)))
            else:
                skipped.append((file, reason))
        if not captures:
            raise InputError(f"{argument}: no capture files in this folder")
        return captures
    if path.is_file():
        return [(path, PurePosixPath(path.name))]
    if path.exists():
        raise InputError(f"{argument}: not a regular file")
    raise InputError(f"{argument}: no such file")


def not_a_capture(path: Path) -> str | None:
    """Why the file is not a capture (the reader's own first look at it), or None."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError as error:
        return f"unreadable: {error.strerror}"
    return head_not_a_capture(head, path.name)


def head_not_a_capture(head: bytes, name: str) -> str | None:
    """Why a file whose first bytes are ``head`` is not a capture, or None."""
    try:
        iter_records(io.BytesIO(head), name)
    except CaptureError as error:
        return str(error).removeprefix(f"{name}: ")
    return None


def skipped_summary(skipped: list[tuple[Path, str]], shown: int = 3) -> str:
    """One line for the files that were not decoded: how many, why, a few names."""
    reasons = Counter(reason.split(" (")[0] for _, reason in skipped)
    names = ", ".join(str(path) for path, _ in skipped[:shown])
    more = f" and {len(skipped) - shown} more" if len(skipped) > shown else ""
    why = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    return f"{len(skipped)} files ({why}): {names}{more}"


def _literal_base(pattern: str) -> Path:
    """The folder a glob starts from: its leading components without wildcards."""
    parts = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path()


def _relative(path: Path, base: Path) -> PurePosixPath:
    return PurePosixPath(Path(os.path.relpath(path, base)).as_posix())


def distinct_names(names: list[PurePosixPath], paths: list[PurePath]) -> list[str]:
    """The names, made unique where two arguments gave the same one (``a/trace.pcap``
    and ``b/trace.pcap`` given as files): those take as many leading folders of their
    full path (``paths``, absolute) as it takes to tell them apart."""
    counts = Counter(names)
    result = []
    for name, mine in zip(names, paths, strict=True):
        if counts[name] == 1:
            result.append(str(name))
            continue
        twins = [p for n, p in zip(names, paths, strict=True) if n == name]
        depth = len(name.parts) + 1
        while depth < len(mine.parts) - 1 and any(
            t != mine and t.parts[-depth:] == mine.parts[-depth:] for t in twins
        ):
            depth += 1
        result.append(PurePosixPath(*mine.parts[-depth:]).as_posix())
    return result
