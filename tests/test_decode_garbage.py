"""A closed connection is freed by reference counting alone.

``pwcap decode`` runs the cyclic collector seldom (cli/decode.py): a connection
whose objects formed a reference cycle would stay in memory until it ran, and tens of
thousands of evicted idle connections then held hundreds of megabytes.
"""

from __future__ import annotations

import gc

from pwcap.decode.driver import decode_captures
from tests.conftest import sample_captures

# What one connection is made of, from reassembly to its decoder's state.
CONNECTION_TYPES = {
    "Connection",
    "_Half",
    "_Tracked",
    "PulsarDecoder",
    "Kafka07Decoder",
    "_Side",
    "FrameStream",
    "ConnectionState",
    "Pairing",
    "Conversation",
    "EntryDecoder",
    "HotReader",
}


def test_decoding_every_sample_leaves_no_connection_to_the_cyclic_collector(tmp_path):
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        decode_captures(sample_captures(), tmp_path / "ds")
        gc.collect()
        left = {type(thing).__name__ for thing in gc.garbage} & CONNECTION_TYPES
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left
