"""A small asyncio Pulsar broker for producing real captures with the official client.

It is a test fixture, independent of pwcap's decoder: it parses and builds frames itself
and writes a JSON line for every frame it reads or writes, the ground truth of the wire.
"""

from tests.broker.server import Broker, BrokerConfig

__all__ = ["Broker", "BrokerConfig"]
