"""What a local Spark that pwcap starts itself (``pwcap analyze``, ``python jobs/<job>.py``)
needs from the machine: Java, checked before PySpark would fail with a traceback, and
driver memory sized to the machine, since local Spark runs every task in the driver's heap.

Importable without pyspark, so the command line can say what is missing at once.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

MIN_DRIVER_MIB = 1024  # Spark's own default: below it, no point
DRIVER_SHARE = 0.5  # of the memory available, for the Spark that runs the jobs
JAVA = 17  # the oldest Java the Spark that pwcap depends on runs on
# A job's JVM lives for seconds: HotSpot's optimizing compiler, at its usual thresholds,
# spends much of a job's CPU compiling code that runs only a while; raised, it compiles
# only the hottest code, and the tasks run as fast. The loop threshold (on-stack
# replacement of a running loop) too. Inlining kept shallow for the same reason: the
# optimizing compiler's time grows with the code it inlines, and it compiles Spark's
# generated code anew for every query (shallower still, or none, and the tasks slow down).
# The throughput collector: a batch of tasks minds no pause, and G1's concurrent marking
# takes cores from the tasks. Its heap starts large (a quarter of the machine's memory, at
# most the driver's maximum): started small, it grew by full collections of everything
# the queries kept (stop-the-world, each longer than the last); and the class metadata
# Spark loads at start has room, where it forced full collections of its own.
JVM_OPTIONS = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4CompileThreshold=50000"
    " -XX:Tier4BackEdgeThreshold=200000"
    " -XX:MaxInlineLevel=4 -XX:MaxInlineSize=20 -XX:FreqInlineSize=100"
    " -XX:InlineSmallCode=500 -XX:LoopUnrollLimit=8"
    " -XX:+UseParallelGC -XX:InitialRAMPercentage=25 -XX:MetaspaceSize=256m"
)
INSTALL_JAVA = "apt-get install openjdk-17-jre-headless, brew install openjdk@17"


def driver_memory(meminfo: str | None = None) -> str:
    """Half the memory available (``MemAvailable`` of ``/proc/meminfo``), at least Spark's
    1g default, whose heap dies (or spends its time collecting) on a dataset of a few
    million rows."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            meminfo = ""
    available_kib = next(
        (int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable:")),
        0,
    )
    return f"{max(MIN_DRIVER_MIB, int(available_kib * DRIVER_SHARE) >> 10)}m"


def java_problem() -> str | None:
    """Why Spark could not start a JVM here, in one line, or None. PySpark would say it
    with a launcher error and a Python traceback. (It runs ``$JAVA_HOME/bin/java`` when
    JAVA_HOME is set, else the PATH's: :func:`java_command`; a JDK's ``release`` file
    names its version.)"""
    java = java_command()
    java_home = os.environ.get("JAVA_HOME")
    if java_home and java is not None and not os.access(java, os.X_OK):
        return (
            f"JAVA_HOME is {java_home}, which has no bin/java: point it at a Java {JAVA}"
            " or later, or unset it to use the java on the PATH"
        )
    if java is None or not os.access(java, os.X_OK):
        return (
            f"Spark needs Java {JAVA} or later, and there is no java on the PATH or in"
            f" JAVA_HOME ({INSTALL_JAVA})"
        )
    version = java_version(release_file(java))
    if version is not None and version < JAVA:
        return (
            f"Spark needs Java {JAVA} or later, and {java} is Java {version}"
            f" ({INSTALL_JAVA}; JAVA_HOME chooses which java runs)"
        )
    return None


def java_command() -> str | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    java_home = os.environ.get("JAVA_HOME")
    return os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")


def release_file(java: str | Path) -> Path:
    """The ``release`` file of the JDK a java binary belongs to (it names the build)."""
    return Path(java).resolve().parent.parent / "release"


def java_version(release: Path) -> int | None:
    """The major version a JDK's ``release`` file names (``JAVA_VERSION="1.8.0_402"`` is 8),
    or None when there is no such file to read."""
    try:
        text = release.read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, flags=re.M)
    return int(found[1]) if found else None
