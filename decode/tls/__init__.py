"""TLS as a per-connection transform between reassembly and protocol detection.

A connection whose first client bytes are a ClientHello gets a :class:`TlsStream` in front
of the sniffing and decoding of its plaintext: ciphertext records in, the application data
out as a byte stream (each byte with the capture time of the record that carried it), the
handshake's facts (version, suite, SNI, ALPN, client certificate) for its ``connections``
row, and what it could not decrypt as ``anomalies`` rows. Secrets come from NSS key logs
(:mod:`.keylog`) and pcapng Decryption Secrets Blocks; they are held in memory only.

The modules, in the order a record meets them: :mod:`.hello` (is this TLS?),
:mod:`.records` (the record walk), :mod:`.handshake` (handshake messages), :mod:`.suites`
(what a cipher suite is), :mod:`.schedule` (keys from secrets), :mod:`.protection`
(one decrypt call per record), :mod:`.stream` (the transform), :mod:`.keys` (where the
secrets of one capture come from, and the sessions resumed).
"""

from .hello import looks_like_client_hello, looks_like_record

__all__ = ["looks_like_client_hello", "looks_like_record"]
