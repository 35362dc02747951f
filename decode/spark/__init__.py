"""Decoding on a Spark cluster into the dataset ``pwcap decode`` writes (``jobs/decode.py``
is the script ``spark-submit`` runs; :mod:`.driver` is its program).

The driver only lists (:mod:`.listing`): nothing of a capture reaches it. Each Spark task
opens its capture through the filesystem (pyarrow's: local, HDFS, S3), streams it through
the one decode driver and hands its rows back as Arrow batches (``mapInArrow``,
:mod:`.tasks`). A capture above :data:`.tasks.SPLIT_ABOVE` bytes is decoded by several
tasks, each keeping a flow-hash share of its connections, as ``pwcap decode --jobs`` does;
the shares' small results come back to the driver for the rows about the whole capture.
The writing tasks unpack the rows into the Parquet files ``pwcap decode`` writes, and the
driver keeps the files of the task attempts that succeeded (:mod:`.writing`).
"""

from ..engine import activate

# An executor's entry is the unpickling of a task's function, which imports this package
# first: the engine is chosen here, before the modules below import the hot path.
activate()
