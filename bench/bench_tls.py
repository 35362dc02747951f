"""``pwcap decode --tls-keylog`` on the real-client benchmark traffic over TLS 1.3, against
the same traffic in plaintext and against tshark with the key log (and the Pulsar plugin).

The plaintext capture is :mod:`bench_real_clients`'s (copies of the real-client samples,
about 50 MB); the TLS capture is the same packets with every connection re-sent over TLS
1.3 (AES-128-GCM) by :mod:`tls_traffic`, its secrets in a key log. Targets (issue 34):
pwcap at least 3x faster than tshark with the key log and the plugin in CPU time, and its
TLS decode at least 70% of the speed of its plaintext decode of the same traffic. Both
datasets must hold the truth files' frame count.

tshark hands decrypted data to the plugin through ``pulsar_over_tls.lua`` (the plugin
registers on TCP ports only); the Pulsar ports are given to TLS with ``-d``.

    python bench/bench_tls.py [--size 50M] [--runs 3] [--data DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import time
from pathlib import Path

from bench_real_clients import plan, real_client_samples, write_replica
from contenders import (
    ONE_PROCESS,
    PLUGIN,
    Contender,
    decoded_rows,
    engine_checked,
    has_pulsar_plugin,
    pwcap_decode,
)
from options import add_options
from scoreboard import contest, print_table
from tls_traffic import encrypt_capture

from pwcap.decode.tls.keylog import KeyLog

LUA = Path(__file__).resolve().parent / "pulsar_over_tls.lua"
TLS_PLUGIN = f"{PLUGIN} + key log"
TLS_ONLY = "tshark + key log (TLS only)"
PLAINTEXT = "pwcap decode, the same traffic in plaintext"
PLUGIN_GOAL, PLAINTEXT_GOAL = 3.0, 0.7
KEYLOG_LINES, KEYLOG_GOAL = 1_000_000, 1.0  # a million-line key log loads in under a second


def keylog_load(path: Path, lines: int) -> None:
    """Time the load of a key log of ``lines`` lines (TLS 1.3's five labels and TLS 1.2's
    CLIENT_RANDOM, random secrets), in this process, CPU time: the file read and indexed,
    and one session looked up (the index is sorted then)."""
    if not path.exists():
        rng = random.Random(34)
        labels = ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET"]
        labels += ["CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0", "EXPORTER_SECRET"]
        with path.open("w") as out:
            while lines > 0:
                client = rng.randbytes(32).hex()
                if rng.random() < 0.5:
                    out.write(f"CLIENT_RANDOM {client} {rng.randbytes(48).hex()}\n")
                    lines -= 1
                else:
                    for label in labels:
                        out.write(f"{label} {client} {rng.randbytes(32).hex()}\n")
                    lines -= len(labels)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    keylog = KeyLog.from_files([str(path)])
    keylog.secrets(bytes(32))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    wall = time.perf_counter() - started
    print(
        f"key log of {keylog.lines:,} lines ({path.stat().st_size / 1e6:.0f} MB): loaded in"
        f" {cpu:.2f} s CPU ({wall:.2f} s wall), peak RSS {after.ru_maxrss / 1e3:.0f} MB:"
        f" target under {KEYLOG_GOAL:.0f} s: {'met' if cpu < KEYLOG_GOAL else 'NOT met'}"
    )


def _tshark(capture: Path, keylog: Path, ports: list[int], plugin: bool) -> list[str]:
    argv = ["tshark", "-r", str(capture), "-o", f"tls.keylog_file:{keylog}"]
    argv += [arg for port in ports for arg in ("-d", f"tcp.port=={port},tls")]
    if plugin:
        argv += ["-X", f"lua_script:{LUA}", "-X", f"lua_script1:{','.join(map(str, ports))}"]
    return [*argv, "-T", "fields", "-e", "frame.number"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="50M", runs=3)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    replica = plan(real_client_samples(), args.size)
    plain = args.data / f"real_clients_{replica.copies}x.pcap"
    if not plain.exists():
        write_replica(plain, replica)
    tls = args.data / f"real_clients_{replica.copies}x_tls13.pcap"
    keylog = tls.with_suffix(".keylog")
    if not tls.exists() or not keylog.exists():
        encrypt_capture(plain, tls, keylog)
    keylog_load(args.data / "million_lines.keylog", KEYLOG_LINES)
    megabytes = tls.stat().st_size / 1e6
    plain_mb, keylog_mb = plain.stat().st_size / 1e6, keylog.stat().st_size / 1e6
    print(
        f"real-client traffic over TLS 1.3: {tls} ({megabytes:.1f} MB, {replica.frames:,} frames;"
        f" plaintext {plain_mb:.1f} MB), key log {keylog_mb:.1f} MB"
    )
    out_tls, out_plain = args.data / "out_tls", args.data / "out_tls_plaintext"
    ours = pwcap_decode(tls, out_tls, *ONE_PROCESS, "--tls-keylog", str(keylog))
    plaintext = Contender(PLAINTEXT, pwcap_decode(plain, out_plain, *ONE_PROCESS).argv)
    contenders = [ours, plaintext]
    if shutil.which("tshark") is None:
        print("  tshark is not installed: no tshark peers")
    else:
        if has_pulsar_plugin():
            contenders.append(Contender(TLS_PLUGIN, _tshark(tls, keylog, replica.ports, True)))
        else:
            print("  tshark lists no Pulsar plugin: tshark with the key log alone")
        contenders.append(Contender(TLS_ONLY, _tshark(tls, keylog, replica.ports, False)))
    contenders.append(Contender("cat (reading the file)", ["cat", str(tls)]))
    results = contest(contenders, args.runs)
    for out in (out_tls, out_plain):
        decoded = decoded_rows(out)
        if decoded != replica.frames:
            sys.exit(f"{out}: {decoded:,} frames of {replica.frames:,}: figures not comparable")
    print_table(results, replica.frames, megabytes)
    by_name = {result.contender.name: result for result in results}
    speed = by_name[PLAINTEXT].cpu / results[0].cpu
    print(
        f"  target: the TLS decode at least {PLAINTEXT_GOAL:.0%} of the plaintext decode's speed"
        f" (CPU): {speed:.0%}: {'met' if speed >= PLAINTEXT_GOAL else 'NOT met'}"
    )
    peer = by_name.get(TLS_PLUGIN) or by_name.get(TLS_ONLY)
    if peer is not None:
        reached = peer.cpu / results[0].cpu
        print(
            f"  target: pwcap at least {PLUGIN_GOAL}x faster than {peer.contender.name} (CPU):"
            f" {reached:.2f}x: {'met' if reached >= PLUGIN_GOAL else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
