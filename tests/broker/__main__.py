"""Run the test broker: ``python -m tests.broker --port 6650 --journal broker.jsonl``."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from tests.broker.server import Broker, BrokerConfig


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
    parser.add_argument("--config", type=json.loads, default={}, help="more BrokerConfig, JSON")
    args = parser.parse_args()
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
