"""The class-data archive of the local Spark JVM (``jobs/class_archive.py``): the first
start writes it, later ones map it; only a JVM that exited cleanly leaves one behind (a
truncated archive crashes the next JVM); it is keyed by what makes it unusable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pwcap.jobs import class_archive
from pwcap.jobs.class_archive import ARCHIVE_VARIABLE, MIN_ARCHIVE_BYTES, ClassArchive, archive_key
from pwcap.jobs.launch import java_command


def exiting(code: int, writes: Path | None = None, size: int = 0) -> subprocess.Popen:
    """A process standing in for the JVM: it writes ``size`` bytes to ``writes`` as it
    exits with ``code``, after its input closes (as PySpark's gateway does)."""
    write = f"open({str(writes)!r}, 'wb').write(bytes({size}))" if writes else ""
    script = f"import sys; sys.stdin.read(); {write}; sys.exit({code})"
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)


def test_a_cleanly_exited_jvm_leaves_its_archive_in_place(tmp_path):
    archive = ClassArchive(tmp_path, "k")
    assert archive.java_options().startswith(f"-XX:ArchiveClassesAtExit={archive.writing} ")
    assert archive.writes_on_exit
    archive.settle(exiting(0, archive.writing, MIN_ARCHIVE_BYTES))
    finished = archive.finished()
    assert finished == tmp_path / f"spark-classes-k-{MIN_ARCHIVE_BYTES}.jsa"
    assert not archive.writing.exists()
    assert archive.java_options().startswith(f"-XX:SharedArchiveFile={finished} ")
    assert not archive.writes_on_exit


def test_an_archive_cut_short_since_it_was_written_is_deleted_and_written_again(tmp_path):
    """HotSpot dies of SIGBUS mapping a truncated archive: its size, in its name, says."""
    archive = ClassArchive(tmp_path, "k")
    archive.settle(exiting(0, archive.writing, MIN_ARCHIVE_BYTES))
    finished = archive.finished()
    with open(finished, "r+b") as cut:
        cut.truncate(MIN_ARCHIVE_BYTES // 2)
    assert archive.finished() is None and not finished.exists()
    assert "ArchiveClassesAtExit" in archive.java_options()


@pytest.mark.parametrize(("code", "size"), [(1, MIN_ARCHIVE_BYTES), (0, 100)])
def test_a_failed_or_truncated_archive_is_deleted_never_mapped(tmp_path, code, size):
    archive = ClassArchive(tmp_path, "k")
    archive.settle(exiting(code, archive.writing, size))
    assert list(tmp_path.iterdir()) == []
    assert "ArchiveClassesAtExit" in archive.java_options()


def test_two_first_runs_at_once_write_one_archive_and_the_second_runs_without(tmp_path):
    first, second = ClassArchive(tmp_path, "k"), ClassArchive(tmp_path, "k")
    assert "ArchiveClassesAtExit" in first.java_options()
    assert second.java_options() == "" and not second.writes_on_exit
    first.settle(exiting(0, first.writing, MIN_ARCHIVE_BYTES))
    assert [p.name for p in tmp_path.glob("*.jsa")] == [f"spark-classes-k-{MIN_ARCHIVE_BYTES}.jsa"]
    assert "SharedArchiveFile" in second.java_options()


def test_a_new_archive_replaces_every_other_and_what_crashed_runs_left(tmp_path):
    """Another Java's or Spark's archive, another size of the same, a partial file."""
    for name in (
        "spark-classes-old-2000000.jsa",
        "spark-classes-k-3000000.jsa",
        "spark-classes-k.1.partial",
    ):
        (tmp_path / name).write_bytes(b"x")
    archive = ClassArchive(tmp_path, "k2")
    assert "ArchiveClassesAtExit" in archive.java_options()
    archive.settle(exiting(0, archive.writing, MIN_ARCHIVE_BYTES))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"spark-classes-k2-{MIN_ARCHIVE_BYTES}.jsa",
        "spark-classes.lock",
    ]


def test_an_archive_over_the_bound_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "MAX_ARCHIVE_BYTES", MIN_ARCHIVE_BYTES)
    archive = ClassArchive(tmp_path, "k")
    archive.java_options()
    archive.settle(exiting(0, archive.writing, MIN_ARCHIVE_BYTES + 1))
    assert list(tmp_path.glob("spark-classes-k*")) == []


def test_each_process_writes_under_a_name_of_its_own(tmp_path):
    archive = ClassArchive(tmp_path, "k")
    assert str(os.getpid()) in archive.writing.name and archive.writing.suffix == ".partial"


def test_the_archive_can_be_turned_off_and_needs_a_cache_it_may_write(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ClassArchive.for_java(java_command()) is not None
    assert (tmp_path / "pwcap").is_dir()
    monkeypatch.setenv(ARCHIVE_VARIABLE, "off")
    assert ClassArchive.for_java(java_command()) is None
    monkeypatch.delenv(ARCHIVE_VARIABLE)
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert ClassArchive.for_java(java_command()) is None
    assert ClassArchive.for_java(None) is None


def test_other_jars_make_another_archive(tmp_path, monkeypatch):
    java = Path(java_command() or sys.executable)
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "spark-core.jar").write_bytes(b"1")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    before = archive_key(java)
    assert archive_key(java) == before
    (tmp_path / "jars" / "spark-sql.jar").write_bytes(b"2")
    assert archive_key(java) != before


@pytest.mark.slow
def test_the_first_spark_writes_the_archive_and_the_next_loads_its_classes_from_it(tmp_path):
    """Real JVMs: the first start writes the archive on exit; the second maps it and
    loads Spark's classes from it, without a word about it on its output."""
    script = (
        "from pwcap.jobs.common import session\n"
        "spark = session('t')\n"
        "spark.range(10).count()\n"
        "print(spark.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    runs = []
    for logged in (None, tmp_path / "classes.log"):
        # HotSpot's own list of where each class came from, on the second start
        tool_options = {"JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={logged}"}
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            env={**env, **tool_options} if logged else env,
        )
        assert done.returncode == 0, done.stderr
        runs.append(done)
    archives = list((tmp_path / "cache" / "pwcap").glob("*.jsa"))  # beside the writers' lock
    assert len(archives) == 1 and archives[0].suffix == ".jsa", archives
    assert f"-XX:ArchiveClassesAtExit={archives[0].parent}" in runs[0].stdout
    assert f"-XX:SharedArchiveFile={archives[0]}" in runs[1].stdout
    assert "cds" not in runs[1].stderr.lower() and "Traceback" not in runs[1].stderr
    lines = [line for log in tmp_path.glob("classes.log*") for line in log.read_text().splitlines()]
    context = [line for line in lines if " org.apache.spark.SparkContext " in line]
    assert context and "shared objects file (top)" in context[0], context
