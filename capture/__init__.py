"""Capture files in, per-connection TCP byte streams out (sans-IO reassembly)."""
