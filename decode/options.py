"""The command-line options that change what is decoded, defined once.

``pwcap decode``, ``pwcap show`` and the Spark decode driver (``jobs/decode.py``) add
them to their parsers and read them back into :class:`DecodeOptions` here: the same
flags must give the same dataset on one machine and on a cluster.
"""

from __future__ import annotations

import argparse

from . import MAX_FRAME_SIZE
from .api import DecodeOptions

HINTED = {"pulsar": "Pulsar", "kafka07": "Kafka 0.7"}  # protocols a port can be given for


def add_decode_options(parser: argparse.ArgumentParser) -> None:
    """Every option of a decode run (read back by :func:`decode_options`)."""
    parser.add_argument("--payloads", action="store_true", help="also write message payload bytes")
    parser.add_argument(
        "--max-frame-size",
        type=size,
        default=MAX_FRAME_SIZE,
        metavar="N",
        help="largest believable frame in bytes, e.g. 5M (brokers may raise theirs)",
    )
    parser.add_argument(
        "--series",
        action="store_true",
        help="the inputs are one capture that tcpdump rotated (-G names): one timeline;"
        " -C/-W names (trace.pcap1...) are recognised without it",
    )
    add_port_arguments(parser)
    add_tunnel_arguments(parser)
    add_tls_arguments(parser)


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    """What the options of :func:`add_decode_options` ask for, as the decoders take it."""
    return DecodeOptions(
        payloads=args.payloads,
        max_frame_size=args.max_frame_size,
        hints=port_hints(args),
        series=args.series,
        tls_keylogs=tuple(args.tls_keylog),
        vxlan_ports=tuple(args.vxlan_port),
    )


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """The TLS secrets ``decode`` and ``show`` share (read back as
    ``DecodeOptions.tls_keylogs``)."""
    parser.add_argument(
        "--tls-keylog",
        action="append",
        default=[],
        metavar="FILE",
        help="NSS key log (SSLKEYLOGFILE) with the TLS sessions' secrets, to decrypt them"
        " (repeatable; secrets a pcapng embeds are used without it); never written out",
    )


def add_port_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol hints: ports whose connections are decoded as a protocol whatever
    their content looks like (``pwcap show`` takes these alone)."""
    for protocol, name in HINTED.items():
        parser.add_argument(
            f"--{protocol}-port",
            type=port,
            action="append",
            default=[],
            metavar="P",
            help=f"decode connections to this port as {name} (repeatable)",
        )


def add_tunnel_arguments(parser: argparse.ArgumentParser) -> None:
    """The tunnels ``decode`` and ``show`` share: UDP ports that carry VXLAN besides the
    usual ones (read back as ``DecodeOptions.vxlan_ports``)."""
    parser.add_argument(
        "--vxlan-port",
        type=port,
        action="append",
        default=[],
        metavar="P",
        help="UDP port that carries VXLAN, besides 4789 and 8472 (repeatable)",
    )


def port_hints(args: argparse.Namespace) -> dict[str, list[int]]:
    """The ports of :func:`add_port_arguments` by protocol, as ``DecodeOptions.hints``."""
    return {"pulsar": args.pulsar_port, "kafka07": args.kafka07_port}


def size(text: str) -> int:
    """A byte count, optionally with a K, M or G suffix (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    scale = units.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale != 1 else text
    try:
        value = int(digits) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def positive(text: str) -> int:
    """A count of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def port(text: str) -> int:
    """A TCP or UDP port number given on the command line."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return number
