"""``pwcap decode`` against its peers on real-client traffic: the sample captures, replicated.

The capture (about 50 MB by default, kept under ``--data``) is made of copies of the
sample captures recorded from real Pulsar clients (``sample_pcaps/pulsar_*.pcap``; not
the ``derived`` ones, damaged on purpose, nor ``snaplen96``, whose packets are cut at 96
bytes). Every copy of every sample is one connection of its own, each starting 20 ms
after the previous one, so connections overlap as at a busy broker (``replica.py``). The
frame count comes from the samples' truth files, not from pwcap, and pwcap's dataset must
have exactly that many frames.

    python bench/bench_real_clients.py [--size 50M] [--runs 3] [--data DIR] [--profile]
"""

from __future__ import annotations

import argparse
import sys

from contenders import (
    ONE_PROCESS,
    PLUGIN,
    TSHARK_DATA,
    decoded_rows,
    engine_checked,
    peers,
    pwcap_decode,
)
from options import add_options
from profile_decode import profile_decode
from replica import plan, real_client_samples, write_replica
from scoreboard import contest, print_table

TARGETS = {PLUGIN: 3.0, TSHARK_DATA: 1.7}  # issue 10: pwcap this many times faster (CPU)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="50M", runs=3)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    replica = plan(real_client_samples(), args.size)
    capture = args.data / f"real_clients_{replica.copies}x.pcap"
    if not capture.exists():
        write_replica(capture, replica)
    megabytes = capture.stat().st_size / 1e6
    out = args.data / "out_real_clients"
    others, notes = peers(capture, replica.ports)
    print(
        f"real-client traffic: {capture} ({megabytes:.1f} MB, {replica.frames:,} frames,"
        f" {replica.copies} copies of {len(replica.samples)} samples, Pulsar ports"
        f" {', '.join(map(str, replica.ports))})"
    )
    for note in notes:
        print(f"  {note}")
    results = contest([pwcap_decode(capture, out, *ONE_PROCESS), *others], args.runs)
    decoded = decoded_rows(out)
    if decoded != replica.frames:
        sys.exit(f"pwcap decoded {decoded:,} frames of {replica.frames:,}: figures not comparable")
    print_table(results, replica.frames, megabytes)
    for result in results:
        if result.contender.name in TARGETS:
            goal, reached = TARGETS[result.contender.name], result.cpu / results[0].cpu
            print(
                f"  issue 10 target: pwcap at least {goal}x faster than {result.contender.name}"
                f" (CPU): {reached:.2f}x: {'met' if reached >= goal else 'NOT met'}"
            )
    if args.profile:
        profile_decode(capture, out, replica.frames)


if __name__ == "__main__":
    main()
