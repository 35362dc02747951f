"""Decoder of the Apache Pulsar binary protocol.

The wire schema lives in ``_pb`` (generated from ``proto/pulsar_api.proto`` by
``proto/generate.py``); the modules beside it turn reassembled stream bytes into rows.
"""
