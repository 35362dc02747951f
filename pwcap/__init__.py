"""pwcap: passive wire-capture decoder and analytics for message-broker traffic."""

__version__ = "0.1.0"
