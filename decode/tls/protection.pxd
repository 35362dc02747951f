# The C declarations of protection.py's classes (Cython reads this file beside
# protection.py when it compiles it), so that the record walk (stream.py) calls a
# direction's `open` as C, and each class keeps its cipher and buffers in C fields.

from pwcap.decode.openssl cimport EVP_CIPHER, EVP_CIPHER_CTX, OSSL_PARAM


cdef class _Cipher:
    cdef EVP_CIPHER *_cipher
    cdef bint _gcm


cdef class _EvpAead:
    cdef EVP_CIPHER_CTX *_ctx
    cdef _Cipher _kind
    cdef bint _ok
    cdef bint _fields
    cdef bint _fixed_set
    cdef unsigned char _fixed[4]
    cdef OSSL_PARAM _params[2]
    cdef unsigned char _invocation[8]
    cdef unsigned char _tag[16]
    cdef OSSL_PARAM _record[3]
    cpdef bint rekey(self, bytes key)
    cpdef object opened(self, bytearray nonce, bytes data, object aad)
    cdef bint _run(self, const unsigned char *nonce, const unsigned char *aad, int aad_size,
                   const unsigned char *sealed, int size, unsigned char *out)
    cdef bint _nonce_and_tag(self, const unsigned char *nonce, void *tag)


cdef class Protection:
    cpdef tuple open(self, unsigned long long seq, bytes header, bytes body)
    cpdef tuple open_at(self, unsigned long long seq, bytes data, Py_ssize_t pos,
                        Py_ssize_t length)
    cpdef object explicit_seq(self, bytes body)


cdef class Tls13(Protection):
    cdef object _suite
    cdef object _aead
    cdef _EvpAead _evp
    cdef bytearray _nonce
    cdef unsigned long long _iv
    cdef Py_ssize_t _tag
    cpdef Tls13 rekeyed(self, object suite, object keys)


cdef class Tls12Aead(Protection):
    cdef object _aead
    cdef bytearray _nonce
    cdef bytearray _aad
    cdef Py_ssize_t _tag


cdef class Tls12Chacha(Protection):
    cdef object _aead
    cdef bytearray _nonce
    cdef unsigned long long _iv
    cdef bytearray _aad


cdef class Tls12Cbc(Protection):
    cdef object _key
    cdef bytes _mac_key
    cdef str _hash
    cdef Py_ssize_t _mac
    cdef bint _etm
    cdef bytearray _aad

    cdef object _decrypt(self, bytes sealed)
