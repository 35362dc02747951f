"""The job scripts as a user runs them (``python jobs/latency.py``, ``spark-submit
jobs/...``): what stands in their way (an existing output, no Java or too old a one) is
one line and exit 1 before Spark starts, never a traceback nor a replaced output; and
``--overwrite`` replaces the tables a job writes, nothing else in the folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pwcap.jobs import permits
from pwcap.jobs.common import output_refusal, run_job
from pwcap.jobs.launch import JVM_OPTIONS, MIN_DRIVER_MIB, java_problem, java_version

JOBS = Path(__file__).resolve().parent.parent / "jobs"
SCRIPTS = ["latency", "permits", "redelivery", "findings", "decode"]
CAPTURE = Path(__file__).resolve().parent.parent / "sample_pcaps" / "pulsar_plain.pcap"


def one_line_error(done: subprocess.CompletedProcess, name: str) -> str:
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"{name}: error: ")
    return done.stderr


@pytest.fixture
def dataset_of(sample_dataset):
    """The input a script is given: a decoded dataset, or a capture for ``decode``."""
    return lambda name: CAPTURE if name == "decode" else sample_dataset


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_existing_output_is_refused_without_overwrite(tmp_path, dataset_of, name):
    out = tmp_path / "out"
    (out / "mine").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, str(JOBS / f"{name}.py"), str(dataset_of(name)), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    error = one_line_error(done, name)
    assert f"{out} already exists (use --overwrite to replace it)" in error
    assert [p.name for p in out.iterdir()] == ["mine"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_without_java_says_what_to_install(tmp_path, dataset_of, name):
    no_java = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no java anywhere on it
    done = subprocess.run(
        [
            sys.executable,
            str(JOBS / f"{name}.py"),
            str(dataset_of(name)),
            "-o",
            str(tmp_path / "a"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java,
    )
    error = one_line_error(done, name)
    assert "Java 17" in error and "openjdk-17-jre-headless" in error
    assert not (tmp_path / "a").exists()


def test_a_script_starts_spark_sized_to_the_machine():
    """``python jobs/<job>.py`` starts the local Spark ``pwcap analyze`` does: half the
    memory available (Spark's 1g died at ten million frames), the JIT settings for a short
    JVM, adaptive execution; no environment variable needed."""
    script = (
        "from pwcap.jobs.common import session\n"
        "spark = session('t')\n"
        "conf = spark.sparkContext.getConf()\n"
        "print(conf.get('spark.driver.memory'))\n"
        "print(conf.get('spark.driver.extraJavaOptions'))\n"
        "print(spark.conf.get('spark.sql.adaptive.enabled'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    memory, options, adaptive = done.stdout.splitlines()
    assert memory.endswith("m") and int(memory[:-1]) >= MIN_DRIVER_MIB, done.stderr
    assert JVM_OPTIONS in options and "log4j2.configurationFile" in options
    assert adaptive == "true"
    assert "Traceback" not in done.stderr and "log4j" not in done.stderr


def test_too_old_a_java_is_named_with_its_version(tmp_path, monkeypatch):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\nexit 1\n")
    java.chmod(0o755)
    (tmp_path / "release").write_text('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="11.0.22"\n')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_problem() == (
        f"Spark needs Java 17 or later, and {java} is Java 11 (apt-get install"
        " openjdk-17-jre-headless, brew install openjdk@17; JAVA_HOME chooses which java runs)"
    )
    (tmp_path / "release").write_text('JAVA_VERSION="21.0.2"\n')
    assert java_problem() is None
    (tmp_path / "release").unlink()  # nothing says: Spark's own check decides
    assert java_problem() is None


@pytest.mark.parametrize(
    ("line", "version"), [('JAVA_VERSION="1.8.0_402"', 8), ('JAVA_VERSION="17.0.15"', 17)]
)
def test_a_release_file_names_the_major_version(tmp_path, line, version):
    (tmp_path / "release").write_text(f"{line}\n")
    assert java_version(tmp_path / "release") == version


def test_a_remote_output_is_checked_through_sparks_filesystem(spark, tmp_path):
    uri = f"file://{tmp_path}"
    assert output_refusal(uri, overwrite=False) is None  # not known before Spark runs
    assert (
        output_refusal(uri, False, spark) == f"{uri} already exists (use --overwrite to replace it)"
    )
    assert output_refusal(uri, True, spark) is None
    assert output_refusal(f"{uri}/new", False, spark) is None


def test_overwrite_replaces_the_tables_a_job_writes_and_keeps_the_others(
    spark, sample_dataset, tmp_path, capsys
):
    """Jobs run one at a time into one analytics folder: a later one keeps the earlier's."""
    out = tmp_path / "analytics"
    (out / "latency_pairs").mkdir(parents=True)
    (out / "latency_pairs" / "kept").write_text("an earlier job's table")
    (out / "permit_summary").mkdir()
    (out / "permit_summary" / "stale").write_text("this job's earlier table")
    argv = [str(sample_dataset), "-o", str(out), "--overwrite"]
    assert run_job("permits", permits.build, argv) == 0
    assert (out / "latency_pairs" / "kept").exists()
    assert not (out / "permit_summary" / "stale").exists()
    assert spark.read.parquet(str(out / "permit_summary")).count() > 0
    assert "permit_summary: " in capsys.readouterr().out
