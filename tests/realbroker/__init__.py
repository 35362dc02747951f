"""Captures of the real Apache Pulsar broker with the real Java and Go clients (see README)."""
