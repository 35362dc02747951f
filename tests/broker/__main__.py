"""Run the test broker: ``python -m tests.broker --port 6650 --journal broker.jsonl``."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from tests.broker.server import Broker, BrokerConfig
from tests.broker.tls import TlsSettings


def parse_args() -> BrokerConfig:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6650)
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024)
    parser.add_argument("--partitions", action="append", default=[], metavar="TOPIC=N")
    parser.add_argument("--entry-metadata", action="store_true")
    parser.add_argument("--ping-interval", type=float)
    parser.add_argument("--journal", type=Path)
    parser.add_argument("--advertised-host", help="host name for the service URL")
    parser.add_argument("--tls-certificates", type=Path, help="speak TLS with these (a folder)")
    parser.add_argument("--tls-keylog", type=Path, help="NSS key log of the TLS sessions")
    parser.add_argument("--tls-version", choices=["1.2", "1.3"])
    parser.add_argument("--tls-ciphers", help="TLS 1.2 cipher suites (OpenSSL cipher string)")
    parser.add_argument("--tls-ciphersuites", help="TLS 1.3 cipher suites")
    parser.add_argument("--tls-client-certificate", action="store_true", help="mutual TLS")
    parser.add_argument("--tls-no-encrypt-then-mac", action="store_true")
    parser.add_argument("--tls-no-tickets", action="store_true")
    parser.add_argument("--tls-key-update-every", type=int, default=0, metavar="FRAMES")
    parser.add_argument("--tls-sessions", type=Path, help="JSON lines: each TLS session")
    parser.add_argument("--config", type=json.loads, default={}, help="more BrokerConfig, JSON")
    args = parser.parse_args()
    tls = None
    if args.tls_certificates is not None:
        tls = TlsSettings(
            args.tls_certificates,
            args.tls_keylog,
            args.tls_version,
            args.tls_ciphers,
            args.tls_ciphersuites,
            args.tls_client_certificate,
            not args.tls_no_encrypt_then_mac,
            not args.tls_no_tickets,
            args.tls_key_update_every,
            args.tls_sessions,
        )
    partitions = {t: int(n) for t, n in (item.rsplit("=", 1) for item in args.partitions)}
    return BrokerConfig(
        args.host,
        args.port,
        args.max_message_size,
        partitions,
        args.entry_metadata,
        args.ping_interval,
        args.journal,
        args.advertised_host,
        tls,
        **args.config,
    )


async def serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    print(f"listening on {config.service_url}", flush=True)  # the corpus tools wait for this
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()


if __name__ == "__main__":
    asyncio.run(serve(parse_args()))
