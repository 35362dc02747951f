"""Decode captures on a Spark cluster into the dataset ``pwcap decode`` writes.

    spark-submit jobs/decode.py 's3a://caps/broker-1/*.pcap*' hdfs:///caps/day1 -o s3a://out/d1
    python jobs/decode.py sample_pcaps -o out.parquet          # embedded local[*] Spark

The script users pass to ``spark-submit``; the decoding itself lives with the decoders,
in :mod:`pwcap.decode.spark`. Importing this module loads nothing of them.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    if not __package__:
        # Run as a script: its relative import is the installed package's (PEP 366).
        __package__ = "pwcap.jobs"
    from ..decode.spark.driver import main

    sys.exit(main())
