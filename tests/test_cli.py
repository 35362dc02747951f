"""The command line around decoding, as a new user meets it: ``--version``, help, path
errors of ``report`` and ``analyze``, one overwrite rule, and ``show``'s listing.

Exit status and stderr are checked on the real process (``python -m pwcap.cli``) where
a traceback would show; the rest calls the CLI in-process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap import __version__
from pwcap.cli import main
from pwcap.cli.analyze import driver_memory
from pwcap.cli.show import command_names
from pwcap.tables.schema import TABLES

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
PLAIN = SAMPLES / "pulsar_plain.pcap"
LOST = SAMPLES / "pulsar_derived_lost.pcap"  # the plain capture with segments cut out


def pwcap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pwcap.cli", *args], capture_output=True, text=True, timeout=300
    )


def one_line_error(done: subprocess.CompletedProcess, command: str) -> str:
    """The error, after checking it is one line, non-zero, and no traceback."""
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"pwcap {command}: error: ")
    return done.stderr


# -- version and help ---------------------------------------------------------------------


def test_version_names_the_version():
    done = pwcap("--version")
    assert done.returncode == 0 and done.stdout.startswith(f"pwcap {__version__}")


def test_the_decode_program_leaves_numpy_unloaded_and_writes_the_same_tables(tmp_path):
    program, in_process = tmp_path / "program", tmp_path / "in_process"
    argv = ["decode", str(SAMPLES), "-o", str(program), "-q", "--jobs", "1"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pwcap.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "pyarrow" in imported and not {name for name in imported if name.startswith("numpy")}
    assert main(["decode", str(SAMPLES), "-o", str(in_process), "-q", "--jobs", "1"]) == 0
    for table in TABLES:
        assert pq.read_table(program / table).equals(pq.read_table(in_process / table))


# Runs the program's entry as `pwcap` does, then says which memory pool Arrow used.
POOL_AFTER_DECODE = """
import sys
sys.argv = ["pwcap", *sys.argv[1:]]
from pwcap.cli import entry
status = entry()
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
sys.exit(status)
"""


@pytest.mark.parametrize(("chosen", "used"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_decode_program_allocates_with_the_c_library_unless_told_otherwise(
    tmp_path, monkeypatch, chosen, used
):
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    if chosen is not None:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    argv = ["decode", str(PLAIN), "-o", str(tmp_path / "ds"), "-q", "--jobs", "1"]
    done = subprocess.run(
        [sys.executable, "-c", POOL_AFTER_DECODE, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [used]


def test_help_is_plain_text_and_every_option_of_show_is_explained():
    top = pwcap("--help").stdout
    assert "``" not in top and "--version" in top
    show = pwcap("show", "--help").stdout
    for option in ("--pulsar-port", "--kafka07-port", "--absolute-time"):
        explained = show.split(option, 1)[1].split("\n  -", 1)[0]
        assert len(explained.split()) > 3, f"{option} has no help text"


# -- report: every path problem is one line ------------------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "dataset"
    assert main(["decode", str(PLAIN), "-o", str(out), "-q"]) == 0
    return out


def test_report_into_a_folder_that_does_not_exist_yet_creates_it(dataset, tmp_path):
    page = tmp_path / "new" / "deeper" / "report.html"
    assert pwcap("report", str(dataset), "-o", str(page)).returncode == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in page.parent.iterdir()] == ["report.html"]


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("a_folder", "is a folder"),
        ("a_file/report.html", "is not a folder"),
    ],
)
def test_report_to_an_unusable_path_is_one_line_and_leaves_nothing(dataset, tmp_path, target, says):
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("mine")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    error = one_line_error(pwcap("report", str(dataset), "-o", str(tmp_path / target)), "report")
    assert says in error and str(tmp_path / target.split("/")[0]) in error
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no .report.html.tmp


def test_report_of_a_folder_of_captures_says_to_decode_it_first(tmp_path):
    error = one_line_error(pwcap("report", str(SAMPLES), "-o", str(tmp_path / "r.html")), "report")
    assert "capture files" in error and "pwcap decode" in error
    assert not (tmp_path / "r.html").exists()


def test_analyze_of_a_folder_of_captures_says_to_decode_it_first(tmp_path):
    error = one_line_error(pwcap("analyze", str(SAMPLES), "-o", str(tmp_path / "a")), "analyze")
    assert "capture files" in error and "pwcap decode" in error
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("meminfo", "memory"),
    [
        ("MemTotal:       24000000 kB\nMemAvailable:    8000000 kB\n", "3906m"),
        ("MemAvailable:     900000 kB\n", "1024m"),  # never below Spark's own default
        ("", "1024m"),  # no /proc: Spark's default
    ],
)
def test_analyze_gives_spark_half_the_memory_available(meminfo, memory):
    assert driver_memory(meminfo) == memory


@pytest.mark.slow
def test_analyze_passes_driver_memory_and_settings_to_the_spark_it_starts(dataset, tmp_path):
    done = pwcap(
        "analyze",
        str(dataset),
        "-o",
        str(tmp_path / "a"),
        "--driver-memory",
        "1500m",
        "--conf",
        "spark.sql.shuffle.partitions=3",
    )
    assert done.returncode == 0, done.stderr
    assert "driver memory 1500m" in done.stderr
    for notice in ("log4j", "Setting default log level", "NativeCodeLoader"):  # Spark's start
        assert notice not in done.stderr
    assert (tmp_path / "a" / "latency_pairs").is_dir()


def test_a_spark_setting_must_be_key_equals_value(dataset, tmp_path):
    done = pwcap("analyze", str(dataset), "-o", str(tmp_path / "a"), "--conf", "nonsense")
    assert done.returncode == 2 and "not KEY=VALUE: 'nonsense'" in done.stderr


def test_analyze_without_java_says_what_to_install(dataset, tmp_path):
    """A machine with Python but no Java: one line naming the package, not a launcher
    error and a traceback."""
    no_java = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no java anywhere on it
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset), "-o", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java,
    )
    error = one_line_error(done, "analyze")
    assert "Java 17" in error and "openjdk-17-jre-headless" in error
    assert not (tmp_path / "a").exists()


def test_report_refuses_analytics_computed_from_another_dataset(spark, dataset, tmp_path, capsys):
    """The analytics record which dataset they came from; a copy of it is the same."""
    analytics, page = tmp_path / "analytics", tmp_path / "report.html"
    assert main(["analyze", str(dataset), "-o", str(analytics)]) == 0
    other = tmp_path / "other"
    assert main(["decode", "-q", str(SAMPLES / "pulsar_slow_consumer.pcap"), "-o", str(other)]) == 0
    capsys.readouterr()
    assert main(["report", str(other), "--analytics", str(analytics), "-o", str(page)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"pwcap report: error: {analytics} was computed from another dataset")
    assert error.count("\n") == 1 and not page.exists()
    shutil.copytree(dataset, tmp_path / "copy")
    assert (
        main(["report", str(tmp_path / "copy"), "--analytics", str(analytics), "-o", str(page)])
        == 0
    )
    assert capsys.readouterr().err == ""


def test_report_of_an_analytics_folder_without_analytics_tables_is_an_error(dataset, tmp_path):
    (tmp_path / "empty").mkdir()
    done = pwcap(
        "report",
        str(dataset),
        "--analytics",
        str(tmp_path / "empty"),
        "-o",
        str(tmp_path / "r.html"),
    )
    assert "no analytics tables in it" in one_line_error(done, "report")


def test_analyze_says_only_its_own_lines_unless_asked_for_sparks(dataset, tmp_path):
    """No JVM notice about incubating modules, no Spark warning about a result kept twice:
    the first line is pwcap's."""
    analyze = ["analyze", str(dataset), "-o", str(tmp_path / "a")]
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", *analyze], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [line.split(",")[0] for line in done.stderr.splitlines()] == [
        "pwcap analyze: Spark local[*]"
    ]


def test_analyze_with_a_java_home_without_java_names_it(dataset, tmp_path):
    """JAVA_HOME decides which java Spark runs, whatever the PATH holds: say it is wrong."""
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset), "-o", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAVA_HOME": "/nonexistent"},
    )
    error = one_line_error(done, "analyze")
    assert "JAVA_HOME is /nonexistent, which has no bin/java" in error
    assert "no java on the PATH" not in error


@pytest.mark.parametrize("command", ["decode", "analyze", "report"])
def test_existing_output_is_replaced_only_with_overwrite(dataset, tmp_path, command):
    """One rule for the three commands that write: refuse, name the option."""
    source = {"decode": PLAIN, "analyze": dataset, "report": dataset}[command]
    out = tmp_path / "out"
    out.write_text("mine") if command == "report" else out.mkdir()
    error = one_line_error(pwcap(command, str(source), "-o", str(out)), command)
    assert f"{out} already exists (use --overwrite to replace it)" in error
    assert out.exists() and (command != "report" or out.read_text() == "mine")


def test_report_replaces_its_page_with_overwrite(dataset, tmp_path):
    page = tmp_path / "report.html"
    page.write_text("old")
    assert pwcap("report", str(dataset), "-o", str(page), "--overwrite").returncode == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("command", ["decode", "analyze"])
def test_unwritable_output_is_one_line_naming_the_output_given(dataset, command):
    """/proc takes no new folders: decode fails creating its temporary dataset there,
    analyze before starting Spark (no Java stack trace)."""
    source = PLAIN if command == "decode" else dataset
    error = one_line_error(pwcap(command, str(source), "-o", "/proc/pwcap-out"), command)
    assert "/proc/pwcap-out:" in error and ".tmp-" not in error and ".probe-" not in error


# -- show -----------------------------------------------------------------------------------


def test_show_an_unknown_command_is_an_error_listing_the_names():
    error = one_line_error(pwcap("show", str(PLAIN), "--command", "SEND", "BOGUS"), "show")
    assert "unknown command BOGUS" in error
    assert {"SEND", "MESSAGE", "FETCH_RESPONSE", "MULTIPRODUCE"} <= command_names()
    assert all(name in error for name in command_names())


def listing(capsys, *args: str) -> list[str]:
    assert main(["show", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_filtered_frames_keep_their_number_and_time_from_the_whole_listing(capsys):
    whole = listing(capsys, str(PLAIN))
    sends = listing(capsys, str(PLAIN), "--command", "SEND", "--limit", "5")
    assert len(sends) == 5
    for line in sends:
        number = int(line.split()[0])
        assert whole[number - 1] == line  # the same frame, the same line
    assert float(whole[0].split()[1]) == 0.0 and float(sends[0].split()[1]) > 0


def test_absolute_times_are_the_capture_times_in_utc(capsys):
    (first,) = listing(capsys, str(PLAIN), "--absolute-time", "--limit", "1")
    day, clock = first.split()[1:3]
    assert day.startswith("20") and clock.count(":") == 2 and "." in clock


def test_a_lossy_capture_shows_its_gaps_inline(capsys):
    """The derived capture lost segments: each gap is a marked line where it happened,
    between numbered frames, and the frame numbers run on undisturbed."""
    lines = listing(capsys, str(LOST))
    marks = [i for i, line in enumerate(lines) if line.split()[0] == "!"]
    assert marks and all("[gap]" in lines[i] and "bytes missing" in lines[i] for i in marks)
    numbers = [int(line.split()[0]) for line in lines if line.split()[0] != "!"]
    assert numbers == list(range(1, len(numbers) + 1))
    clean = listing(capsys, str(PLAIN))
    assert not any(line.split()[0] == "!" for line in clean)


def test_anomalies_follow_the_connection_filter(capsys):
    assert main(["show", str(LOST), "--conn", "1"]) == 1
    assert "[gap]" not in capsys.readouterr().out


def test_show_says_when_no_frame_matches(capsys):
    assert main(["show", str(PLAIN), "--conn", "123", "--command", "SEND"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "pwcap show: error: no frame matches --conn 123 --command SEND\n"


@pytest.mark.parametrize("limit", ["-1", "0", "ten"])
def test_show_refuses_a_limit_that_is_not_a_count(capsys, limit):
    with pytest.raises(SystemExit) as exited:
        main(["show", str(PLAIN), "--limit", limit])
    assert exited.value.code == 2
    assert "argument --limit: " in capsys.readouterr().err


def test_a_dataset_lists_the_same_frames_and_anomalies_as_its_capture(tmp_path, capsys):
    """Decoding shows an anomaly when the decoder meets it; a dataset has only times, so
    there each anomaly stands before the first frame not older than it."""
    assert main(["decode", str(LOST), "-o", str(tmp_path / "out"), "-q"]) == 0
    from_capture = listing(capsys, str(LOST))
    from_dataset = listing(capsys, str(tmp_path / "out"))
    frames = [line for line in from_dataset if line.split()[0] != "!"]
    assert frames == [line for line in from_capture if line.split()[0] != "!"]
    assert sorted(from_dataset) == sorted(from_capture)
    for i, line in enumerate(from_dataset):
        if line.split()[0] == "!":
            after = next(f for f in from_dataset[i:] if f.split()[0] != "!")
            assert float(line.split()[1]) <= float(after.split()[1])
