"""pwcap: passive wire-capture decoder and analytics for message-broker traffic."""

from pwcap.engine import engine, install_finder

__version__ = "0.1.0"
__all__ = ["__version__", "engine"]

install_finder()  # before any hot-path module is imported (see pwcap.engine)
