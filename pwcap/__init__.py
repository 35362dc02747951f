"""pwcap: passive wire-capture decoder and analytics for message-broker traffic.

Importing it defines names only; a program picks its decoder engine with
:func:`pwcap.decode.engine.activate` before it imports the hot path.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
