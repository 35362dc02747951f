# The C declarations of protection.py's classes (Cython reads this file beside
# protection.py when it compiles it), so that the record walk (stream.py) calls a
# direction's `open` as C, and each class keeps its cipher and buffers in C fields.

cdef class Protection:
    cpdef tuple open(self, unsigned long long seq, bytes header, bytes body)
    cpdef object explicit_seq(self, bytes body)


cdef class Tls13(Protection):
    cdef object _aead
    cdef bytearray _nonce
    cdef unsigned long long _iv
    cdef Py_ssize_t _tag


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
