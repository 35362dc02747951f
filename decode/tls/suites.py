"""What a cipher suite is, for decryption: its record cipher, key sizes and hashes.

Every suite a current Java, OpenSSL or Go peer negotiates by default is here (RFC 8446
for TLS 1.3; for TLS 1.2 the ECDHE, DHE and RSA suites with AES-GCM, AES-CCM,
ChaCha20-Poly1305 and AES-CBC with HMAC). The key exchange does not matter to a decoder
given the master secret; the record protection does.
"""

from __future__ import annotations

from dataclasses import dataclass

GCM, CCM, CCM8, CHACHA, CBC = "gcm", "ccm", "ccm8", "chacha20", "cbc"
DIGEST_SIZES = {"sha1": 20, "sha256": 32, "sha384": 48}  # the suites' hashes, in bytes


@dataclass(frozen=True, slots=True)
class Suite:
    code: int
    name: str
    tls13: bool
    cipher: str  # one of GCM, CCM, CCM8, CHACHA, CBC
    key_size: int
    hash: str  # the PRF's (TLS 1.2) or HKDF's (TLS 1.3) hash, a hashlib name
    mac: str | None = None  # CBC suites: the HMAC's hash

    @property
    def iv_size(self) -> int:
        """The IV a key schedule derives: 12 bytes for TLS 1.3 and ChaCha20, the 4-byte
        salt of TLS 1.2's GCM and CCM (8 more travel in each record), none for CBC (its
        IV travels in each record)."""
        if self.tls13 or self.cipher == CHACHA:
            return 12
        return 0 if self.cipher == CBC else 4

    @property
    def mac_size(self) -> int:
        return DIGEST_SIZES[self.mac] if self.mac else 0


def _suites() -> dict[int, Suite]:
    table = [
        Suite(0x1301, "TLS_AES_128_GCM_SHA256", True, GCM, 16, "sha256"),
        Suite(0x1302, "TLS_AES_256_GCM_SHA384", True, GCM, 32, "sha384"),
        Suite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", True, CHACHA, 32, "sha256"),
        Suite(0x1304, "TLS_AES_128_CCM_SHA256", True, CCM, 16, "sha256"),
        Suite(0x1305, "TLS_AES_128_CCM_8_SHA256", True, CCM8, 16, "sha256"),
    ]
    # TLS 1.2 AEAD suites: (code, key exchange, cipher, key size, PRF hash)
    aead = [
        (0x009C, "RSA", GCM, 16, "sha256"),
        (0x009D, "RSA", GCM, 32, "sha384"),
        (0x009E, "DHE_RSA", GCM, 16, "sha256"),
        (0x009F, "DHE_RSA", GCM, 32, "sha384"),
        (0xC02B, "ECDHE_ECDSA", GCM, 16, "sha256"),
        (0xC02C, "ECDHE_ECDSA", GCM, 32, "sha384"),
        (0xC02F, "ECDHE_RSA", GCM, 16, "sha256"),
        (0xC030, "ECDHE_RSA", GCM, 32, "sha384"),
        (0xCCA8, "ECDHE_RSA", CHACHA, 32, "sha256"),
        (0xCCA9, "ECDHE_ECDSA", CHACHA, 32, "sha256"),
        (0xCCAA, "DHE_RSA", CHACHA, 32, "sha256"),
        (0xC09C, "RSA", CCM, 16, "sha256"),
        (0xC09D, "RSA", CCM, 32, "sha256"),
        (0xC09E, "DHE_RSA", CCM, 16, "sha256"),
        (0xC09F, "DHE_RSA", CCM, 32, "sha256"),
        (0xC0A0, "RSA", CCM8, 16, "sha256"),
        (0xC0A1, "RSA", CCM8, 32, "sha256"),
        (0xC0A2, "DHE_RSA", CCM8, 16, "sha256"),
        (0xC0A3, "DHE_RSA", CCM8, 32, "sha256"),
        (0xC0AC, "ECDHE_ECDSA", CCM, 16, "sha256"),
        (0xC0AD, "ECDHE_ECDSA", CCM, 32, "sha256"),
        (0xC0AE, "ECDHE_ECDSA", CCM8, 16, "sha256"),
        (0xC0AF, "ECDHE_ECDSA", CCM8, 32, "sha256"),
    ]
    names = {GCM: "{}_GCM", CCM: "{}_CCM", CCM8: "{}_CCM_8", CHACHA: "CHACHA20_POLY1305"}
    for code, exchange, cipher, key, prf in aead:
        bulk = names[cipher].format(f"AES_{key * 8}")
        suffix = f"_{prf.upper()}" if cipher in (GCM, CHACHA) else ""
        table.append(Suite(code, f"TLS_{exchange}_WITH_{bulk}{suffix}", False, cipher, key, prf))
    # TLS 1.2 CBC suites: (code, key exchange, key size, HMAC hash); the PRF is SHA-256
    # but for the SHA-384 suites.
    cbc = [
        (0x002F, "RSA", 16, "sha1"),
        (0x0035, "RSA", 32, "sha1"),
        (0x003C, "RSA", 16, "sha256"),
        (0x003D, "RSA", 32, "sha256"),
        (0x0033, "DHE_RSA", 16, "sha1"),
        (0x0039, "DHE_RSA", 32, "sha1"),
        (0x0067, "DHE_RSA", 16, "sha256"),
        (0x006B, "DHE_RSA", 32, "sha256"),
        (0xC009, "ECDHE_ECDSA", 16, "sha1"),
        (0xC00A, "ECDHE_ECDSA", 32, "sha1"),
        (0xC013, "ECDHE_RSA", 16, "sha1"),
        (0xC014, "ECDHE_RSA", 32, "sha1"),
        (0xC023, "ECDHE_ECDSA", 16, "sha256"),
        (0xC024, "ECDHE_ECDSA", 32, "sha384"),
        (0xC027, "ECDHE_RSA", 16, "sha256"),
        (0xC028, "ECDHE_RSA", 32, "sha384"),
    ]
    for code, exchange, key, mac in cbc:
        name = f"TLS_{exchange}_WITH_AES_{key * 8}_CBC_{'SHA' if mac == 'sha1' else mac.upper()}"
        prf = "sha384" if mac == "sha384" else "sha256"
        table.append(Suite(code, name, False, CBC, key, prf, mac))
    return {suite.code: suite for suite in table}


SUITES: dict[int, Suite] = _suites()


def suite_name(code: int) -> str:
    """The IANA name of a suite, or its number for one pwcap does not decrypt."""
    suite = SUITES.get(code)
    return suite.name if suite is not None else f"0x{code:04X}"
