"""Protocol decoders (sans-IO) and the Parquet dataset they fill."""
