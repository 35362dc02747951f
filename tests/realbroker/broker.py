"""The real Pulsar standalone in a child JVM, on loopback ports chosen free at start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = HERE / "standalone.conf"
START_TIMEOUT_S = 600  # 10 s of CPU; minutes of wall time on a machine shared with others
# The client tier of the JIT alone and the serial collector: a start costs less than half
# the CPU of the defaults (the broker's speed does not matter here).
JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx1g",
    "-XX:MaxDirectMemorySize=1g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
]

# Extra settings per broker configuration a scenario asks for.
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "entry_metadata": {
        "brokerEntryMetadataInterceptors": (
            "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor,"
            "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"
        ),
        "exposingBrokerEntryMetadataToClientEnabled": "true",
    },
    # The transaction coordinator and its system topics cost a broker start seconds: only
    # the transaction scenarios' brokers have them.
    "transactions": {"transactionCoordinatorEnabled": "true"},
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def telemetry_env(port: int) -> dict[str, str]:
    """The broker's OpenTelemetry metrics on a Prometheus endpoint at ``port``: its per
    consumer counters (acks, redeliveries, messages out) exist only there, not in the
    admin API's stats."""
    return {
        "OTEL_SDK_DISABLED": "false",
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }


class BrokerError(RuntimeError):
    pass


class Standalone:
    """``with Standalone(classpath, "default") as broker:`` a running broker.

    ``broker.service_url``, ``broker.admin_url`` and ``broker.metrics_url`` (its
    OpenTelemetry metrics) reach it; its log is kept in
    ``broker.log`` until the context ends (printed on a failed start).
    """

    def __init__(self, classpath: str, config: str = "default", warm_up: bool = True) -> None:
        self.classpath = classpath
        self.config = config
        self.warm_up = warm_up
        self.port = free_port()
        self.web_port = free_port()
        self.bookie_port = free_port()
        self.metrics_port = free_port()
        self.service_url = f"pulsar://127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.web_port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self._dir = Path(tempfile.mkdtemp(prefix="pwcap-pulsar-"))
        self.log = self._dir / "broker.log"
        self._process: subprocess.Popen[bytes] | None = None

    def _settings(self) -> Path:
        extra = {
            "brokerServicePort": str(self.port),
            "webServicePort": str(self.web_port),
            **CONFIGS[self.config],
        }
        path = self._dir / "standalone.conf"
        lines = [SETTINGS.read_text(), *(f"{k}={v}" for k, v in extra.items())]
        path.write_text("\n".join(lines) + "\n")
        return path

    def __enter__(self) -> Standalone:
        command = ["java", *JVM_OPTIONS, "-cp", self.classpath]
        command += ["org.apache.pulsar.PulsarStandaloneStarter", "--config", str(self._settings())]
        command += ["--wipe-data", "--no-functions-worker", "--no-stream-storage"]
        command += ["--metadata-dir", str(self._dir / "metadata")]
        command += ["--bookkeeper-dir", str(self._dir / "bookkeeper")]
        command += ["--bookkeeper-port", str(self.bookie_port)]
        with self.log.open("wb") as log:
            env = {**os.environ, **telemetry_env(self.metrics_port)}
            self._process = subprocess.Popen(
                command, cwd=self._dir, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        """Ready once the standalone has created its default namespace, as it does last."""
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerError(f"broker exited with {self._process.returncode}:\n{self._tail()}")
            try:
                if "public/default" in self.get("/admin/v2/namespaces/public"):
                    if self.warm_up:
                        self._warm_up()
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1.0)
        raise BrokerError(f"broker not ready in {START_TIMEOUT_S} s:\n{self._tail()}")

    def _warm_up(self) -> None:
        """Load a first topic, so the connection the broker opens to itself for the
        namespace's topic policies (a reader of __change_events) exists before any capture.
        """
        path = "/admin/v2/persistent/public/default/warm-up"
        request = urllib.request.Request(self.admin_url + path, method="PUT")
        urllib.request.urlopen(request, timeout=30).close()
        self.get(path + "/stats")
        time.sleep(2.0)

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def get(self, path: str) -> object:
        with urllib.request.urlopen(self.admin_url + path, timeout=10) as response:
            return json.load(response)

    def version(self) -> str:
        """The broker's own version, as its admin API reports it."""
        with urllib.request.urlopen(self.admin_url + "/admin/v2/brokers/version", timeout=10) as r:
            return r.read().decode().strip().strip('"')

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)
