"""Regenerate the TLS sample captures: ``python -m tests.corpus.tls [NAME ...]`` (root).

Each scenario runs the test broker behind TLS (Python's ``ssl``, which writes the
sessions' secrets to ``sample_pcaps/NAME.keylog``) and a real client over it, under
tcpdump, as :mod:`tests.corpus.regenerate` does for the plaintext samples: the official
Python client (``pulsar+ssl://``, its C++ core's OpenSSL) for the Pulsar exchanges, and
Python's own ``ssl`` client speaking a few Pulsar frames where the scenario needs what
the official client does not do (AES-CCM, session resumption). The broker's journal is
the frames' truth; what OpenSSL negotiated for each connection (version, suite, client
certificate, resumption) is added to ``NAME.truth.json`` under ``tls``.

Then the derived samples are made from ``tls13_aes_gcm``: the same capture as pcapng
with its secrets embedded (``editcap --inject-secrets``; without editcap, a Decryption
Secrets Block written by :mod:`fuzz.pcapfile`), the capture cut after the
handshake (``tls13_derived_midstream``) and a key log whose secrets are wrong
(``tls13_aes_gcm.wrong.keylog``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pulsar

from fuzz.pcapfile import read_pcap, write_pcap, write_pcapng
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from tests.broker.tls import CA, CLIENT_CERT, CLIENT_KEY, SERVER_NAME, write_certificates
from tests.broker.wire import U32, build_frame, command_of
from tests.corpus.record import ClientRecord, quiet_logger
from tests.corpus.regenerate import SAMPLES, capture_scenario, write_derived_truth, write_json
from tests.corpus.scenarios import Scenario, payload, properties, receive_and_ack
from tests.corpus.truth import read_journal

BASE = "tls13_aes_gcm"  # the scenario the derived samples come from
T = pb.BaseCommand


def exchange(
    service_url: str, certificates: Path, count: int = 10, mutual: bool = False
) -> ClientRecord:
    """The official client over TLS: a producer and a consumer, ``count`` messages."""
    record = ClientRecord()
    options: dict[str, object] = {}
    if mutual:
        options["authentication"] = pulsar.AuthenticationTLS(
            str(certificates / CLIENT_CERT), str(certificates / CLIENT_KEY)
        )
    client = pulsar.Client(
        service_url,
        tls_trust_certs_file_path=str(certificates / CA),
        tls_validate_hostname=True,
        operation_timeout_seconds=15,
        logger=quiet_logger(),
        **options,
    )
    try:
        consumer = client.subscribe(
            "tls", "tls-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = client.create_producer(
            "tls", producer_name="tls-producer", batching_enabled=False
        )
        for i in range(count):
            record.send(
                producer, payload(i, 120), i, key=f"key-{i % 3}", properties=properties("tls", i)
            )
        receive_and_ack(record, consumer, count)
        producer.close()
        time.sleep(0.3)  # the grouped acknowledgements go out before the close
        consumer.close()
    finally:
        client.close()
    return record


def resumption(
    service_url: str, certificates: Path, version: ssl.TLSVersion, ciphers: str | None = None
) -> ClientRecord:
    """Python's ``ssl`` client, three connections of one session (a full handshake, then
    two resuming it): each says CONNECT and PING and waits for the answers."""
    host, port = service_url.removeprefix("pulsar+ssl://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(certificates / CA))
    context.minimum_version = context.maximum_version = version
    if ciphers:
        context.set_ciphers(ciphers)
    session = None
    for _ in range(3):
        with (
            socket.create_connection((host, int(port))) as raw,
            context.wrap_socket(raw, server_hostname=host, session=session) as tls,
        ):
            _request(
                tls, command_of(T.CONNECT, client_version="pwcap-ssl-client", protocol_version=21)
            )
            _request(tls, command_of(T.PING))
            session = tls.session  # TLS 1.3: known once a ticket was read (after CONNECTED)
            tls.unwrap()
    return ClientRecord()


def _request(tls: ssl.SSLSocket, command: pb.BaseCommand) -> None:
    """Send a frame and read the answer's frame whole."""
    tls.sendall(build_frame(command))
    size = U32.unpack(_read(tls, 4))[0]
    _read(tls, size)


def _read(tls: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = tls.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


@dataclass(frozen=True)
class TlsScenario:
    name: str
    description: str
    client: Callable[..., ClientRecord]  # (service URL, certificate folder)
    broker: list[str] = field(default_factory=list)  # the broker's --tls-* options
    port: int = 6651


SCENARIOS = [
    TlsScenario(
        BASE,
        "TLS 1.3 (the suite both prefer: AES-256-GCM), the official client",
        exchange,
        ["--tls-version", "1.3"],
    ),
    TlsScenario(
        "tls13_chacha20",
        "TLS 1.3 with ChaCha20-Poly1305, the official client",
        exchange,
        ["--tls-version", "1.3", "--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"],
        6652,
    ),
    TlsScenario(
        "tls12_ecdhe_aes_gcm",
        "TLS 1.2 ECDHE-RSA with AES-128-GCM, the official client",
        exchange,
        ["--tls-version", "1.2", "--tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256"],
        6653,
    ),
    TlsScenario(
        "tls12_chacha20",
        "TLS 1.2 ECDHE-RSA with ChaCha20-Poly1305, the official client",
        exchange,
        ["--tls-version", "1.2", "--tls-ciphers", "ECDHE-RSA-CHACHA20-POLY1305"],
        6654,
    ),
    TlsScenario(
        "tls12_cbc_etm",
        "TLS 1.2 ECDHE-RSA with AES-128-CBC and HMAC-SHA256, encrypt-then-MAC",
        exchange,
        ["--tls-version", "1.2", "--tls-ciphers", "ECDHE-RSA-AES128-SHA256"],
        6655,
    ),
    TlsScenario(
        "tls12_cbc_mte_mutual",
        "mutual TLS 1.2, ECDHE-ECDSA with AES-256-CBC and HMAC-SHA1, MAC-then-encrypt",
        partial(exchange, mutual=True),
        [
            "--tls-version",
            "1.2",
            "--tls-ciphers",
            "ECDHE-ECDSA-AES256-SHA",
            "--tls-no-encrypt-then-mac",
            "--tls-client-certificate",
        ],
        6656,
    ),
    TlsScenario(
        "tls13_mutual",
        "mutual TLS 1.3: the client's certificate travels encrypted",
        partial(exchange, mutual=True),
        ["--tls-version", "1.3", "--tls-client-certificate"],
        6657,
    ),
    TlsScenario(
        "tls13_key_update",
        "TLS 1.3, a longer session: the broker sends a KeyUpdate asking for one back every"
        " 8 frames it writes, so both directions change keys several times",
        partial(exchange, count=40),
        ["--tls-version", "1.3", "--tls-key-update-every", "8"],
        6658,
    ),
    TlsScenario(
        "tls12_ccm_resumed_id",
        "TLS 1.2 ECDHE-ECDSA with AES-128-CCM, resumed twice by session id (no tickets);"
        " Python's ssl client sends CONNECT and PING",
        partial(resumption, version=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-ECDSA-AES128-CCM"),
        ["--tls-version", "1.2", "--tls-ciphers", "ECDHE-ECDSA-AES128-CCM", "--tls-no-tickets"],
        6659,
    ),
    TlsScenario(
        "tls12_resumed_ticket",
        "TLS 1.2 ECDHE-RSA AES-256-GCM resumed twice by session ticket; Python's ssl client",
        partial(resumption, version=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-RSA-AES256-GCM-SHA384"),
        ["--tls-version", "1.2"],
        6660,
    ),
    TlsScenario(
        "tls13_resumed_psk",
        "TLS 1.3 resumed twice with a pre-shared key from a ticket; Python's ssl client",
        partial(resumption, version=ssl.TLSVersion.TLSv1_3),
        ["--tls-version", "1.3"],
        6661,
    ),
]


def capture_tls(scenario: TlsScenario, certificates: Path, out_dir: Path) -> dict:
    """Record one scenario; its truth gets the broker's view of each TLS session."""
    keylog = out_dir / f"{scenario.name}.keylog"
    sessions = out_dir / f"{scenario.name}.sessions.jsonl"
    arguments = ["--advertised-host", SERVER_NAME, "--tls-certificates", str(certificates)]
    arguments += ["--tls-keylog", str(keylog), "--tls-sessions", str(sessions), *scenario.broker]
    plain = Scenario(
        scenario.name,
        scenario.description,
        partial(scenario.client, certificates=certificates),
        port=scenario.port,
        broker={"arguments": arguments},
    )
    truth = capture_scenario(plain, out_dir)
    truth["tls"] = read_journal(sessions)
    sessions.unlink()
    write_json(out_dir / f"{scenario.name}.truth.json", truth)
    return truth


def derive(out_dir: Path) -> None:
    """The pcapng with secrets, the capture without its handshake, the wrong key log."""
    base = out_dir / f"{BASE}.pcap"
    keylog = out_dir / f"{BASE}.keylog"
    truth = json.loads((out_dir / f"{BASE}.truth.json").read_text())
    original = read_pcap(base)
    name = "tls13_derived_secrets"
    target = out_dir / f"{name}.pcapng"
    if shutil.which("editcap"):
        subprocess.run(["editcap", "--inject-secrets", f"tls,{keylog}", base, target], check=True)
        how = "editcap --inject-secrets"
    else:
        write_pcapng(target, original, secrets=keylog.read_bytes())
        how = "fuzz.pcapfile.write_pcapng (no editcap on this machine)"
    manifest = {"kind": "secrets", "how": how, "order": list(range(len(original.records)))}
    write_derived_truth(out_dir, name, truth, manifest, "pcapng", BASE)
    # Cut after the handshake: from the moment the broker read the first frame on.
    first_frame = min(row["t_us"] for row in read_journal(out_dir / f"{BASE}.broker.jsonl"))
    order = [i for i, record in enumerate(original.records) if record.ts_us >= first_frame]
    name = "tls13_derived_midstream"
    write_pcap(
        out_dir / f"{name}.pcap",
        type(original)(original.linktype, original.snaplen, [original.records[i] for i in order]),
    )
    manifest = {"kind": "midstream", "order": order, "first_ts_us": first_frame}
    write_derived_truth(out_dir, name, truth, manifest, "pcap", BASE)
    # The same lines with secrets of the right sizes that are not the session's.
    wrong = []
    for line in keylog.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and not line.startswith("#"):
            line = " ".join([parts[0], parts[1], os.urandom(len(parts[2]) // 2).hex()])
        wrong.append(line)
    (out_dir / f"{BASE}.wrong.keylog").write_text("\n".join(wrong) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scenarios to capture (default: all)")
    parser.add_argument("--out", type=Path, default=SAMPLES)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        certificates = write_certificates(Path(folder))
        for scenario in SCENARIOS:
            if not args.names or scenario.name in args.names:
                truth = capture_tls(scenario, certificates, args.out)
                packets, frames = truth["capture"]["packets"], truth["frames_total"]
                print(f"{scenario.name}: {packets} packets, {frames} frames")
    if (args.out / f"{BASE}.pcap").exists():
        derive(args.out)
        print(f"derived TLS captures rebuilt from {BASE}")


if __name__ == "__main__":
    main()
