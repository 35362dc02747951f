"""The dataset contract: the schema of every table pwcap writes, and the Parquet writer.

Both sides of the pipeline import this package and nothing else of each other: the
decoders fill these tables, the Spark jobs read them. It imports nothing heavier than
pyarrow, so Spark executors running the jobs need nothing of the decoder.
"""
