"""``jobs/decode.py`` on a Spark standalone cluster of this machine: a master and two
workers started as the README's cluster section starts a cluster's (``spark-class
...Master`` / ``...Worker``), the job submitted with ``spark-submit --master spark://``.

A worker killed mid-run (as the OOM killer would) loses nothing: the dataset is the one
``pwcap decode`` writes. An output one worker cannot see (its own mount of the folder, as
a node's local disk would be) is refused, or, when the user says it is shared, found
short and not written. A packed environment whose interpreter the workers lack is named.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.test_decode_jobs import assert_same_dataset

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_pcaps"
BIN = Path(sys.executable).parent
STARTED_WITHIN_S = 120

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(log: Path, text: str, count: int = 1) -> None:
    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log}:\n{log.read_text(errors='replace')[-2000:]}")


class Cluster:
    """A standalone master and its workers, each in a process group of its own (a
    worker's executors with it), stopped when the test ends."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        spark_home = str(Path(pyspark.__file__).parent)  # spark-class finds no other here
        self.environment = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1"}
        self.processes: list[subprocess.Popen] = []
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        self.master = self._start(
            "master", [*master, "--port", str(self.port), "--webui-port", "0"]
        )

    def _start(self, name: str, command: list[str], wrap: list[str] = ()) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (the process holds it)
        process = subprocess.Popen(
            [*wrap, str(BIN / "spark-class"), *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.environment,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def add_worker(self, private: Path | None = None) -> subprocess.Popen:
        """A worker of one core; with ``private``, it sees a folder of its own at that
        path (a tmpfs mounted in a mount namespace of its own: root only)."""
        name = f"worker{len(self.processes)}"
        wrap: list[str] = []
        if private is not None:
            mount = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
            wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount]
            wrap.append(str(private))
        worker = ["org.apache.spark.deploy.worker.Worker", self.url, "--cores", "1"]
        worker += ["--memory", "1g", "--host", "127.0.0.1", "--webui-port", "0"]
        worker += ["--work-dir", str(self.folder / name)]
        process = self._start(name, worker, wrap)
        wait_for(self.folder / "master.log", "Registering worker", len(self.processes) - 1)
        return process

    def submit(
        self, *arguments: str, extra: list[str] = (), env: dict | None = None
    ) -> subprocess.Popen:
        command = [str(BIN / "spark-submit"), "--master", self.url, *extra]
        command += ["--conf", "spark.driver.host=127.0.0.1", str(ROOT / "jobs" / "decode.py")]
        return subprocess.Popen(
            [*command, *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.environment, "PYSPARK_PYTHON": sys.executable, **(env or {})},
            cwd=self.folder,
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path)
    try:
        wait_for(tmp_path / "master.log", "I have been elected leader")
        yield running
    finally:
        running.stop()


def errors(output: str) -> list[str]:
    """The job's own error lines (spark-submit passes the Python driver's standard error
    on to its standard output, among the lines its JVM logs)."""
    return [line for line in output.splitlines() if line.startswith("decode: error: ")]


def part_files(out: Path) -> list[Path]:
    return [p for p in out.parent.glob(f".{out.name}.tmp-*/frames/*.parquet")]


def test_a_worker_killed_mid_run_loses_nothing(cluster: Cluster, sample_dataset: Path):
    doomed = cluster.add_worker()
    cluster.add_worker()
    out = cluster.folder / "data" / "out"
    job = cluster.submit(str(SAMPLES), "-o", str(out), "--shared-output")
    deadline = time.monotonic() + STARTED_WITHIN_S
    while not part_files(out) and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(doomed.pid, signal.SIGKILL)  # the worker and its executor, mid-run
    _, stderr = job.communicate(timeout=1800)
    assert job.returncode == 0, stderr[-3000:]
    assert_same_dataset(sample_dataset, out)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a worker with a folder of its own needs root (a mount namespace)",
)
def test_an_output_one_worker_cannot_see_is_refused_and_never_half_written(cluster: Cluster):
    data = cluster.folder / "data"
    data.mkdir()
    cluster.add_worker()
    cluster.add_worker(private=data)  # its own empty `data`, as a node's local disk
    out = data / "out"
    refused = cluster.submit(str(SAMPLES), "-o", str(out))
    stdout, _ = refused.communicate(timeout=1800)
    assert refused.returncode == 1
    (said,) = errors(stdout)
    assert said.startswith(f"decode: error: {out} is a path on this machine")
    told_shared = cluster.submit(str(SAMPLES), "-o", str(out), "--shared-output")
    stdout, stderr = told_shared.communicate(timeout=1800)
    assert told_shared.returncode == 1, stderr[-3000:]
    (said,) = errors(stdout)
    assert "part files the tasks wrote are missing" in said
    assert "Traceback" not in stdout + stderr
    assert sorted(p.name for p in data.iterdir()) == []  # no dataset, nothing beside it


def test_a_packed_interpreter_the_workers_lack_is_named(cluster: Cluster, tmp_path: Path):
    """A venv-pack archive made where Python lives elsewhere: bin/python links to it."""
    cluster.add_worker()
    packed = tmp_path / "env.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        link = tarfile.TarInfo("bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "python3"
        tar.addfile(link)
        link = tarfile.TarInfo("bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, "/opt/elsewhere/bin/python3.11"
        tar.addfile(link)
    job = cluster.submit(
        str(SAMPLES),
        "-o",
        str(tmp_path / "data" / "out"),
        "--shared-output",
        extra=["--archives", f"{packed}#environment"],
        env={"PYSPARK_PYTHON": "./environment/bin/python", "PYSPARK_DRIVER_PYTHON": sys.executable},
    )
    stdout, stderr = job.communicate(timeout=1800)
    assert job.returncode == 1
    assert errors(stdout) == [
        "decode: error: the executors cannot run ./environment/bin/python: in"
        f" {packed} it links to /opt/elsewhere/bin/python3.11, which the worker nodes lack"
        " (they need Python at the same path, or pack the environment on a matching image:"
        " see the README)"
    ]
    assert "\tat org.apache" not in stdout + stderr and "Traceback" not in stdout + stderr
