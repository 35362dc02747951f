"""What a cluster decode checks before it decodes anything, each failure one line: an
output given by URI (before Spark starts), an output on this machine's own disk when the
executors run elsewhere, and the executors' interpreter (a packed environment whose
``bin/python`` links to a path the worker nodes lack)."""

from __future__ import annotations

import os
import tarfile
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from pyarrow import fs as pafs
from pyspark.sql import SparkSession

from ...tables.dataset import DatasetError
from .listing import unreachable
from .writing import pyarrow_uri, refuse_existing

SYMLINK_HOPS = 40  # links followed inside an archive before giving up (a loop)


def check_uri_output(output: str, overwrite: bool) -> None:
    """An output named by URI, through pyarrow's filesystem (the one the tasks write
    with), before Spark starts: reachable, and new unless overwriting an earlier dataset.
    Raise :class:`DatasetError`."""
    try:
        filesystem, path = pafs.FileSystem.from_uri(pyarrow_uri(output))
        info = filesystem.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return
        is_folder = info.type == pafs.FileType.Directory
        held = filesystem.get_file_info(pafs.FileSelector(path)) if is_folder else []
    except (OSError, ValueError) as error:
        raise DatasetError(f"{output}: cannot reach it ({unreachable(error)})") from None
    refuse_existing(
        output, overwrite, is_folder, lambda: {PurePosixPath(e.path).name for e in held}
    )


def on_this_machine(path: str) -> bool:
    """A plain path or a ``file:`` URI: a disk of the machine that reads it."""
    return "://" not in path or path.startswith("file:")


def unshared_output(spark: SparkSession, output: str) -> str | None:
    """Why ``output`` cannot be written from a cluster's executors, or None: a path on
    this machine's disk, when the executors run on other machines (a non-local master),
    would leave each task's part files on its own node's disk."""
    master = spark.sparkContext.master
    if master.startswith("local") or not on_this_machine(output):
        return None
    return (
        f"{output} is a path on this machine, and the executors of {master} run on other"
        " machines, which would write their part of the dataset to their own disks: write"
        " to storage every node sees (hdfs://, s3a://), or give --shared-output if the path"
        " is a mount every node shares"
    )


def interpreter_problem(spark: SparkSession, log_level: str = "WARN") -> str | None:
    """Start a Python worker on the executors (a task each) and say, in one line, why
    they cannot, or None. A packed environment (docs/cluster.md) whose
    ``bin/python`` links to an interpreter path the worker nodes lack fails every task
    with Spark's "Cannot run program" and a long trace: the link's target is named.
    Spark's logging is off meanwhile, then at ``log_level`` when they can. When they
    cannot, it stays off: the run ends on that line, and the aborted job's other attempts
    go on failing for a moment, each logging its trace."""
    from py4j.protocol import Py4JJavaError

    context = spark.sparkContext
    if context.master.startswith("local"):
        return None  # the executors run this machine's interpreter (PYSPARK_PYTHON)
    context.setLogLevel("OFF")  # the failed attempts' traces; the line below says it
    try:
        slots = max(1, context.defaultParallelism)
        context.parallelize(range(slots), slots).map(lambda _: os.getpid()).collect()
    except Py4JJavaError as error:
        text = str(error.java_exception)
        if "Cannot run program" not in text:
            return f"the executors could not start a Python worker: {text.splitlines()[0]}"
        return _missing_interpreter(context.getConf().get("spark.archives", ""), text)
    context.setLogLevel(log_level)
    return None


def _missing_interpreter(archives: str, error: str) -> str:
    python = os.environ.get("PYSPARK_PYTHON", "python3")
    said = f"the executors cannot run {python}"
    relative = PurePosixPath(python.removeprefix("./"))
    for entry in filter(None, archives.split(",")):
        archive, _, alias = entry.partition("#")
        if archive.startswith("file:"):
            archive = urlsplit(archive).path
        alias = alias or PurePosixPath(archive).name
        if relative.parts[:1] != (alias,):
            continue
        target = _link_target(archive, relative.relative_to(alias))
        if target is not None:
            return (
                f"{said}: in {archive} it links to {target}, which the worker nodes lack"
                " (they need Python at the same path, or pack the environment on a"
                " matching image: see docs/cluster.md)"
            )
    return f"{said} ({error.splitlines()[0]})"


def _link_target(archive: str, member: PurePosixPath) -> str | None:
    """Where ``member`` of the archive ends up outside it, following its links (None when
    the archive cannot be read here, or the member does not lead outside)."""
    try:
        with tarfile.open(archive) as tar:
            names = {PurePosixPath(info.name.removeprefix("./")): info for info in tar}
    except (OSError, tarfile.TarError):
        return None
    for _ in range(SYMLINK_HOPS):
        info = names.get(member)
        if info is None or not info.issym():
            return None
        target = PurePosixPath(info.linkname)
        if target.is_absolute():
            return str(target)
        member = PurePosixPath(os.path.normpath(member.parent / target))
    return None
