"""The analytics jobs read Parquet only: a Spark executor running them needs PySpark and
pyarrow, nothing of the decoder, the capture code or their libraries. (``jobs/decode.py``,
the script that runs the decoder on Spark, imports it only when run.)"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pwcap.jobs
from pwcap.decode.kafka07.wire import ANSWERED, REQUEST_NAMES
from pwcap.decode.pulsar import commands
from pwcap.jobs import request_commands

FORBIDDEN = (
    "pwcap.decode",
    "pwcap.capture",
    "lz4",
    "zstandard",
    "google.protobuf",
    "crc32c",
    "google_crc32c",
)


def test_no_analytics_job_module_loads_the_decoder_or_its_libraries():
    modules = [f"pwcap.jobs.{m.name}" for m in pkgutil.iter_modules(pwcap.jobs.__path__)]
    assert {"pwcap.jobs.latency", "pwcap.jobs.permits", "pwcap.jobs.redelivery"} <= set(modules)
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = json.loads(done.stdout)
    assert "pyspark" in loaded  # the import really ran the jobs' modules
    assert [m for m in loaded if m.startswith(FORBIDDEN)] == []


def test_the_jobs_requests_are_the_ones_the_pulsar_decoder_pairs():
    by_role: dict[str | None, set[str]] = {}
    for name, (_, role) in commands.SEMANTICS.items():
        by_role.setdefault(role, set()).add(name)
    client_sent = {n for n in commands.SEMANTICS if commands.SEMANTICS[n][0] != commands.BROKER}
    requests = by_role[commands.REQUEST] | by_role[commands.SEND] | by_role[commands.CONNECT]
    assert set(request_commands.PULSAR_CLIENT_REQUESTS) == requests & client_sent
    assert set(request_commands.PULSAR_BROKER_REQUESTS) == by_role[commands.CHALLENGE]
    assert set(request_commands.PULSAR_EITHER_REQUESTS) == by_role[commands.PING]
    assert {request_commands.PULSAR_ACK} == by_role[commands.ACK]


def test_the_jobs_requests_are_the_ones_the_kafka_decoder_pairs():
    assert set(request_commands.KAFKA_REQUESTS) == {REQUEST_NAMES[t] for t in ANSWERED}
