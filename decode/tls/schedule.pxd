cimport cython

# The C declarations of schedule.py's classes (Cython reads this file beside schedule.py
# when it compiles it): HMAC through a MAC context kept per hash. The OpenSSL calls are
# declared in ../openssl.pxd.

from pwcap.decode.openssl cimport EVP_MAC_CTX, OSSL_PARAM


cdef class _Hmac:
    cdef EVP_MAC_CTX *_ctx
    cdef bytes _digest
    cdef Py_ssize_t _size
    cdef OSSL_PARAM _params[2]

    cpdef bint ready(self)
    @cython.locals(out=bytes)
    cpdef bytes first(self, bytes key, bytes data, Py_ssize_t length)
    @cython.locals(out=bytes, second=bytes)
    cpdef tuple pair(self, bytes key, bytes data, Py_ssize_t length, bytes more,
                     Py_ssize_t more_length)
    @cython.locals(keyed=cython.int)
    cdef bint _mac(self, object key, bytes data, bytes out, Py_ssize_t length)


cdef class Keys:
    cdef readonly bytes key
    cdef readonly bytes iv
    cdef readonly bytes mac_key
