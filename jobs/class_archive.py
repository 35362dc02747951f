"""A class-data archive for the JVM that pwcap starts itself, so its Spark starts faster.

A local Spark JVM loads and verifies some ten thousand classes before the first query
runs, seconds of every job. HotSpot can write the classes it loaded into an
archive when it exits (``-XX:ArchiveClassesAtExit``) and map that archive at the next
start (``-XX:SharedArchiveFile``).

The first run writes the archive under a name of its own and renames it into place only
once its JVM has exited cleanly, with its size in its new name: HotSpot maps the file, and
a truncated one crashes it (SIGBUS), so one whose size no longer matches is deleted rather
than mapped. Later runs map the finished file, which is never written again.
The archive is keyed by everything that makes it unusable when it changes (the Java build,
Spark's jars); HotSpot checks the rest itself and starts without the archive (silently,
with its cds logging off) when it does not match. Deleting the folder is always safe.

The folder keeps one archive: one run at a time writes (a lock; a run that finds another
writing starts without an archive), and the run that puts a new archive in place deletes
every other (another Java's or Spark's, or a crashed run's partial file). One that would
exceed MAX_ARCHIVE_BYTES is not kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

import pyspark

from .launch import release_file

ARCHIVE_VARIABLE = "PWCAP_CLASS_ARCHIVE"  # "off" turns it off
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatched archive is not worth a warning
EXIT_WAIT_S = 120  # the JVM writing its archive on exit: seconds (a few, usually)
MIN_ARCHIVE_BYTES = 1 << 20  # less is no archive of a Spark JVM
MAX_ARCHIVE_BYTES = 512 << 20  # more is not kept (Spark 4's is about 110 MB)
PREFIX = "spark-classes"  # of every file the folder holds


def cache_folder() -> Path:
    """Where pwcap keeps what it can rebuild: ``$XDG_CACHE_HOME/pwcap`` (``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pwcap"


def archive_key(java: Path) -> str:
    """What the archive was made with: the Java build (its ``release`` file), Spark's
    version and the jars of its class path."""
    jars = Path(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)) / "jars"
    try:
        release = release_file(java).read_bytes()
    except OSError:
        release = b""
    digest = hashlib.sha256()
    for part in (str(java.resolve()).encode(), release, pyspark.__version__.encode()):
        digest.update(part + b"\0")
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size}\0".encode())
    return digest.hexdigest()[:16]


class ClassArchive:
    """The archive of one Java and Spark: the options for a JVM about to start, then
    :meth:`settle` once that JVM is done with."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = folder
        self.key = key
        self.writing = folder / f"{PREFIX}-{key}.{os.getpid()}.partial"
        self.writes_on_exit = False
        self._lock: int | None = None  # the descriptor holding the writers' lock

    @classmethod
    def for_java(cls, java: str | None) -> ClassArchive | None:
        """The archive for ``java``, or None when turned off, without a Java or a cache
        folder pwcap may write in."""
        if java is None or os.environ.get(ARCHIVE_VARIABLE, "").lower() == "off":
            return None
        folder = cache_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        if not os.access(folder, os.W_OK):
            return None
        return cls(folder, archive_key(Path(java)))

    def finished(self) -> Path | None:
        """The archive a JVM wrote and exited after, whole. Its name holds its size: a
        file cut short since (a full disk, a partial copy) would crash the JVM that maps
        it, so it is deleted instead, and the next JVM writes another."""
        for path in sorted(self.folder.glob(f"{PREFIX}-{self.key}-*.jsa")):
            try:
                whole = path.stat().st_size == int(path.stem.rsplit("-", 1)[1])
            except (OSError, ValueError):
                whole = False
            if whole:
                return path
            path.unlink(missing_ok=True)
        return None

    def java_options(self) -> str:
        """Map the finished archive, or write one on exit (then :meth:`settle`); nothing
        while another run is writing one."""
        archive = self.finished()
        self.writes_on_exit = archive is None and self._locked()
        if archive is not None:
            return f"-XX:SharedArchiveFile={archive} {QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.writing} {QUIET}" if self.writes_on_exit else ""

    def _locked(self) -> bool:
        """Whether this run now holds the writers' lock (it keeps it until it settles)."""
        if self._lock is None:
            descriptor = os.open(self.folder / f"{PREFIX}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(descriptor)
                return False
            self._lock = descriptor
        return True

    def settle(self, jvm: subprocess.Popen) -> None:
        """After a JVM that wrote the archive: wait for it to exit (closing its input
        is how PySpark's gateway tells it to), then keep the archive only if it exited
        cleanly; a partial file is deleted, never mapped."""
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()
            jvm.wait(timeout=EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            size = self.writing.stat().st_size if jvm.returncode == 0 else 0
            if MIN_ARCHIVE_BYTES <= size <= MAX_ARCHIVE_BYTES:
                kept = self.folder / f"{PREFIX}-{self.key}-{size}.jsa"
                os.replace(self.writing, kept)
                if self._locked():
                    self._remove_all_but(kept)
            else:
                self.writing.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            if self._lock is not None:
                os.close(self._lock)  # and with it the lock
                self._lock = None

    def _remove_all_but(self, kept: Path) -> None:
        """Every other archive and partial file: no run writes one but the lock's holder."""
        for path in self.folder.glob(f"{PREFIX}-*"):
            if path != kept:
                with contextlib.suppress(OSError):
                    path.unlink()
