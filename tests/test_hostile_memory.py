"""Inputs shaped to make pwcap hold memory: the peak stays under the budget.

A batch of a million bytes may declare and hold hundreds of thousands of empty messages,
one row each, all from one capture record. The rows are converted to Arrow as the batch
fills them, so the process stays within the 400 MB budget however many rows one record
yields (it reached 628 MB when rows waited for the next periodic flush).
"""

from __future__ import annotations

import struct
import subprocess
import sys

import pyarrow.parquet as pq

from tests.pulsar_frames import command, entry_bytes, frame, pb

MEMORY_BUDGET_MB = 400
BATCH_BYTES = 1 << 20
# One member: its metadata's size, then a SingleMessageMetadata of payload_size 0.
EMPTY_MESSAGE = struct.pack(">I", 2) + pb.SingleMessageMetadata(payload_size=0).SerializeToString()


def empty_batch_send() -> tuple[bytes, int]:
    count = BATCH_BYTES // len(EMPTY_MESSAGE)
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=count
    )
    send = command("SEND", producer_id=1, sequence_id=0, num_messages=count)
    return frame(send, entry_bytes(metadata, EMPTY_MESSAGE * count)), count


# Runs the command as its own child and prints that child's peak RSS alone (the test
# process's own children include every Spark and decode an earlier test started).
_PEAK_OF = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
sys.exit(done.returncode)
"""


def test_a_batch_of_empty_messages_stays_within_the_memory_budget(tmp_path, write_capture):
    send, count = empty_batch_send()
    capture = write_capture(tmp_path / "bomb.pcap", [(6650, [(0, send)])])
    out = tmp_path / "ds"
    decode = [sys.executable, "-m", "pwcap.cli", "decode", str(capture), "-o", str(out), "-q"]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF, *decode], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert pq.read_metadata(out / "messages" / "part-00000.parquet").num_rows == count
    assert float(done.stdout) < MEMORY_BUDGET_MB
