"""Which captures a cluster decode reads: listed on the driver, by name, on any
filesystem pyarrow reaches, and recognised by their first bytes as ``pwcap decode``
recognises them, so rows carry the same ``capture`` and ``conn_id``."""

from __future__ import annotations

import fnmatch
import glob
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from pyarrow import fs as pafs

from ..inputs import InputError, distinct_names, expand_inputs, head_not_a_capture
from ..series import head_timestamp, in_time_order, rotated_groups, series_name

SNIFF_BYTES = 4096
SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for what pyarrow calls s3
# What pyarrow's HDFS client loads (libhdfs, then the JVM through it) and where from.
HDFS_NEEDS = (
    "pyarrow reaches HDFS through libhdfs and a JVM: set JAVA_HOME to a JDK, HADOOP_HOME"
    " to a Hadoop installation and CLASSPATH to `hadoop classpath --glob`"
)


@dataclass(frozen=True, slots=True)
class Listed:
    """One capture to decode: its dataset name, the filesystem (a URI pyarrow opens) and
    the paths in it where a task reads it (several: a rotated series, read in turn),
    and its size."""

    name: str
    filesystem: str
    paths: list[str]
    size: int


def list_captures(arguments: list[str], series: bool = False) -> tuple[list[Listed], list[str]]:
    """The captures the arguments name (files, folders, globs; on any filesystem pyarrow
    reaches), largest first, and the files of folders that are not captures. Rotated
    files (or all of them: ``series``) are one capture each series, as for ``pwcap
    decode``; names are made unique, so connection ids are too."""
    local = [a for a in arguments if "://" not in a]
    remote = [a for a in arguments if "://" in a]
    if series and local and remote:
        raise InputError("--series: the files of one series must be on one filesystem")
    listed: list[tuple[Listed, PurePosixPath]] = []
    skipped: list[str] = []
    if local:
        expanded = expand_inputs(local, series)
        for capture in expanded.captures:
            if capture.path is None:
                raise InputError("standard input cannot be shared with a cluster")
            paths = [str(part.resolve()) for part in capture.parts or (capture.path,)]
            where = PurePosixPath(paths[0]).parent / PurePosixPath(capture.name).name
            listed.append((Listed(capture.name, f"file://{paths[0]}", paths, capture.size), where))
        skipped += [str(path) for path, _ in expanded.skipped]
    if remote:
        found: dict[PurePosixPath, _Found] = {}
        for argument in remote:
            files, not_captures = _list_remote(argument)
            for file in files:
                found.setdefault(file.where, file)  # a file named twice is decoded once
            skipped += not_captures
        listed += _remote_captures(found, series)
    return sorted(_unique_names(listed), key=lambda c: -c.size), skipped


@dataclass(frozen=True, slots=True)
class _Found:
    """A capture file a URI argument names."""

    uri: str  # of its filesystem, for pyarrow
    path: str  # in that filesystem
    where: PurePosixPath  # where it is among every filesystem's files (:func:`_where`)
    name: PurePosixPath  # below the argument
    size: int


def _list_remote(argument: str) -> tuple[list[_Found], list[str]]:
    """A file, folder, or glob in its last part (``s3a://b/caps/*.pcap``) named by URI;
    names are paths below the folder, as for local arguments."""
    scheme, rest = argument.split("://", 1)
    uri = f"{SCHEMES.get(scheme, scheme)}://{rest.rstrip('/')}"
    pattern = None
    if glob.has_magic(rest):
        uri, pattern = uri.rsplit("/", 1)
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(path)
    except (OSError, ValueError) as error:
        raise InputError(f"{argument}: cannot reach it ({unreachable(error)})") from None
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{argument}: no such file or folder")

    def found(file: pafs.FileInfo, name: PurePosixPath) -> _Found:
        return _Found(uri, file.path, _where(uri, file.path), name, file.size)

    if info.type != pafs.FileType.Directory:
        return [found(info, PurePosixPath(PurePosixPath(path).name))], []
    files = filesystem.get_file_info(pafs.FileSelector(path, recursive=pattern is None))
    base = PurePosixPath(path)
    captures, skipped = [], []
    for file in sorted((f for f in files if f.is_file), key=lambda f: f.path):
        name = PurePosixPath(file.path).relative_to(base)
        if pattern is not None:
            if fnmatch.fnmatchcase(str(name), pattern):
                captures.append(found(file, name))
            continue
        with filesystem.open_input_stream(file.path) as stream:
            reason = head_not_a_capture(stream.read(SNIFF_BYTES), str(name))
        if reason is None:
            captures.append(found(file, name))
        else:
            skipped.append(f"{argument.rstrip('/')}/{name}")
    if not captures:
        raise InputError(f"{argument}: no capture files there")
    return captures, skipped


def unreachable(error: Exception) -> str:
    """Why pyarrow could not reach a filesystem, in a line: the first of its message (a
    JVM it cannot load lists every folder it looked in, 90 lines), and what HDFS needs
    when its libraries are missing."""
    said = (str(error).strip() or type(error).__name__).splitlines()[0]
    if "libjvm" in said or "libhdfs" in said:
        return f"{said}: {HDFS_NEEDS}"
    return said


def _where(uri: str, path: str) -> PurePosixPath:
    """One absolute path for a file of any filesystem: ``/a/b`` on the local one,
    ``/s3:/bucket/a/b``, ``/hdfs:/namenode:8020/a/b`` elsewhere (pyarrow's S3 paths start
    with their bucket, its HDFS paths with ``/``, below the URI's host)."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return PurePosixPath(path)
    host = [parts.netloc] if path.startswith("/") else []
    return PurePosixPath("/", f"{parts.scheme}:", *host, path.lstrip("/"))


def _remote_captures(
    found: dict[PurePosixPath, _Found], series: bool
) -> list[tuple[Listed, PurePosixPath]]:
    """The URI arguments' files as captures: rotated files one capture each series
    (every file one series with ``series``), read in the order of their first records."""
    opened: dict[str, pafs.FileSystem] = {}

    def first(where: PurePosixPath) -> int:
        file = found[where]
        if file.uri not in opened:
            opened[file.uri] = pafs.FileSystem.from_uri(file.uri)[0]
        with opened[file.uri].open_input_stream(file.path) as stream:
            return head_timestamp(stream.read(SNIFF_BYTES), file.path)

    files = list(found)
    if series and len({_filesystem(found[where].uri) for where in files}) > 1:
        raise InputError("--series: the files of one series must be on one filesystem")
    groups = [in_time_order(files, first)] if series else rotated_groups(files, first)
    captures = []
    for group in groups:
        head = found[group[0]]
        name = str(head.name) if len(group) == 1 else series_name(str(head.name))
        paths = [found[where].path for where in group]
        size = sum(found[where].size for where in group)
        where = group[0].parent / PurePosixPath(name).name
        captures.append((Listed(name, head.uri, paths, size), where))
    return captures


def _filesystem(uri: str) -> str:
    """The filesystem a URI is on: its scheme and host (an S3 bucket, an HDFS namenode)."""
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _unique_names(listed: list[tuple[Listed, PurePosixPath]]) -> list[Listed]:
    """The captures under names of their own (two arguments' ``trace.pcap`` take leading
    folders until they differ, as :func:`expand_inputs` names local files): a name is a
    capture's scope for connection ids, so two captures must never share one."""
    names = distinct_names([PurePosixPath(c.name) for c, _ in listed], [w for _, w in listed])
    taken = [name for name, count in Counter(names).items() if count > 1]
    if taken:
        raise InputError(f"two captures would both be named {taken[0]}: name them apart")
    return [replace(capture, name=name) for (capture, _), name in zip(listed, names, strict=True)]
