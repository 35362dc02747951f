"""The path rules every sub-command shares, so ``decode``, ``analyze`` and ``report``
answer a wrong path the same way: one line naming the path the user typed."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

LOOKED_AT = 100  # files of a wrong folder checked for captures before giving up


class PathError(Exception):
    """A path the command cannot use; the message names it and says why."""


def check_new_output(path: Path, overwrite: bool) -> None:
    """Refuse to replace ``path`` without ``--overwrite`` (the rule ``decode`` has too)."""
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise PathError(f"{path} already exists (use --overwrite to replace it)")


def check_writable(path: Path) -> None:
    """Make the folders leading to ``path`` and try writing beside it, so a command that
    runs for minutes (Spark) fails at once, in one line, where it could not write."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{path.name}.probe-", dir=path.parent):
            pass
    except OSError as error:
        raise PathError(f"{path}: cannot write there ({error.strerror or error})") from None


def check_dataset(path: Path) -> None:
    """``path`` must be a decoded dataset (``pwcap decode -o``), not captures or a typo."""
    if not path.exists():
        raise PathError(f"{path}: no such folder")
    if not path.is_dir():
        raise PathError(f"{path}: not a dataset folder (pwcap decode -o writes one)")
    if (path / "frames").is_dir():
        return
    from ..decode.inputs import not_a_capture

    files = [p for p in itertools.islice(path.iterdir(), LOOKED_AT) if p.is_file()]
    if any(not_a_capture(p) is None for p in files):
        raise PathError(
            f"{path} holds capture files, not a decoded dataset:"
            f" decode them first (pwcap decode {path} -o DATASET)"
        )
    raise PathError(f"{path}: not a decoded dataset (no frames/ folder in it)")


def describe(error: OSError, shown: Path | None = None) -> str:
    """An OS error in one line, naming ``shown`` (the user's path) when given, not the
    temporary file the command was really writing."""
    where = shown if shown is not None else error.filename
    reason = error.strerror or str(error)
    return f"{where}: {reason}" if where else reason
