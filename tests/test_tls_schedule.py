"""The TLS key schedules and record protection against published test vectors: RFC 8448's
"Simple 1-RTT Handshake" trace (TLS_AES_128_GCM_SHA256) and the TLS 1.2 PRF vector of
the IETF TLS working group (P_SHA256, "test label")."""

from __future__ import annotations

from pwcap.decode.tls.protection import Tls13
from pwcap.decode.tls.schedule import hkdf_expand_label, prf, traffic_keys
from pwcap.decode.tls.suites import SUITES

AES_128_GCM_SHA256 = SUITES[0x1301]
H = bytes.fromhex

# RFC 8448 section 3: the four traffic secrets and the keys and IVs derived from them.
SERVER_HANDSHAKE = H("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
CLIENT_HANDSHAKE = H("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
SERVER_APPLICATION = H("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")
CLIENT_APPLICATION = H("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")
KEYS = [
    (SERVER_HANDSHAKE, "3fce516009c21727d0f2e4e86ee403bc", "5d313eb2671276ee13000b30"),
    (CLIENT_HANDSHAKE, "dbfaa693d1762c5b666af5d950258d01", "5bd3c71b836e0b76bb73265f"),
    (SERVER_APPLICATION, "9f02283b6c9c07efc26bb9f2ac92e356", "cf782b88dd83549aadf1e984"),
    (CLIENT_APPLICATION, "17422dda596ed5d9acd890e3c63f5051", "5b78923dee08579033e523d9"),
]
# The application records of the trace: 50 bytes 00..31 each way, then close_notify.
CLIENT_DATA = H(
    "1703030043a23f7054b62c94d0affafe8228ba55cbefacea42f914aa66bcab3f2b9819a8a5b46b395bd54a"
    "9a20441e2b62974e1f5a6292a2977014bd1e3deae63aeebb21694915e4"
)
CLIENT_ALERT = H("1703030013c9872760655666b74d7ff1153efd6db6d0b0e3")
SERVER_DATA = H(  # its second record under these keys: a NewSessionTicket came first
    "17030300432e937e11ef4ac740e538ad36005fc4a46932fc3225d05f82aa1b36e30efaf97d90e6dffc602d"
    "cb501a59a8fcc49c4bf2e5f0a21c0047c2abf332540dd032e167c2955d"
)
FIFTY = bytes(range(0x32))


def test_hkdf_expand_label_gives_rfc_8448s_finished_key():
    finished = hkdf_expand_label(SERVER_HANDSHAKE, b"finished", b"", 32, "sha256")
    assert finished == H("008d3b66f816ea559f96b537e885c31fc068bf492c652f01f288a1d8cdc19fc8")


def test_traffic_keys_are_rfc_8448s():
    for secret, key, iv in KEYS:
        keys = traffic_keys(AES_128_GCM_SHA256, secret)
        assert (keys.key.hex(), keys.iv.hex()) == (key, iv)


def test_tls13_records_of_rfc_8448_open_with_their_sequence_numbers():
    client = Tls13(AES_128_GCM_SHA256, traffic_keys(AES_128_GCM_SHA256, CLIENT_APPLICATION))
    assert client.open(0, CLIENT_DATA[:5], CLIENT_DATA[5:]) == (23, FIFTY)
    assert client.open(1, CLIENT_ALERT[:5], CLIENT_ALERT[5:]) == (21, b"\x01\x00")
    assert client.open(1, CLIENT_DATA[:5], CLIENT_DATA[5:]) is None  # the wrong number
    server = Tls13(AES_128_GCM_SHA256, traffic_keys(AES_128_GCM_SHA256, SERVER_APPLICATION))
    assert server.open(1, SERVER_DATA[:5], SERVER_DATA[5:]) == (23, FIFTY)


def test_a_damaged_record_does_not_authenticate():
    client = Tls13(AES_128_GCM_SHA256, traffic_keys(AES_128_GCM_SHA256, CLIENT_APPLICATION))
    for at in (0, 3, 30, len(CLIENT_DATA) - 6):
        damaged = bytearray(CLIENT_DATA)
        damaged[at] ^= 0x01
        assert client.open(0, bytes(damaged[:5]), bytes(damaged[5:])) is None, at


def test_tls12_prf_gives_the_working_groups_vector():
    out = prf(
        H("9bbe436ba940f017b17652849a71db35"),
        b"test label",
        H("a0ba9f936cda311827a6f796ffd5198c"),
        100,
        "sha256",
    )
    assert out == H(
        "e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61edb5a6b301791e90d35c9c9a46b"
        "4e14baf9af0fa022f7077def17abfd3797c0564bab4fbc91666e9def9b97fce34f796789baa48082d122ee"
        "42c5a72e5a5110fff70187347b66"
    )


def _cryptography_expand_label(secret: bytes, label: bytes, length: int, hash: str) -> bytes:
    """HKDF-Expand-Label by pyca ``cryptography``'s HKDFExpand: the peer the key schedule
    is held to for SHA-384 and for outputs longer than a hash."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    algorithm = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}[hash]
    return HKDFExpand(algorithm(), length, info).derive(secret)


def test_hkdf_expand_label_agrees_with_cryptography_for_both_hashes():
    for hash, size in (("sha256", 32), ("sha384", 48)):
        secret = bytes(range(7, 7 + size))
        for label, length in ((b"key", 16), (b"key", 32), (b"iv", 12), (b"traffic upd", size)):
            expected = _cryptography_expand_label(secret, label, length, hash)
            assert hkdf_expand_label(secret, label, b"", length, hash) == expected
        longer = _cryptography_expand_label(secret, b"exporter", 2 * size + 5, hash)
        assert hkdf_expand_label(secret, b"exporter", b"", 2 * size + 5, hash) == longer


def test_traffic_keys_of_every_tls13_suite_agree_with_cryptography():
    for suite in (suite for suite in SUITES.values() if suite.tls13):
        secret = bytes(range(3, 3 + (48 if suite.hash == "sha384" else 32)))
        keys = traffic_keys(suite, secret)
        assert keys.key == _cryptography_expand_label(secret, b"key", suite.key_size, suite.hash)
        assert keys.iv == _cryptography_expand_label(secret, b"iv", 12, suite.hash)
