"""Protocol detection, the per-connection decoders (sans-IO) and the run that drives them."""

# The largest frame believed by default (Pulsar brokers' own default limit); a broker may
# raise its limit, and `--max-frame-size` follows it. Here, not in `api`, so the command
# line can read it without importing the table contract (and pyarrow).
MAX_FRAME_SIZE = 5 * 1024 * 1024
