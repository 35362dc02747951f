cimport cython

# The C declarations of schedule.py's OpenSSL calls (Cython reads this file beside
# schedule.py when it compiles it): HMAC through a MAC context kept per hash.

cdef extern from "openssl/params.h":
    ctypedef struct OSSL_PARAM:
        pass
    OSSL_PARAM OSSL_PARAM_construct_utf8_string(const char *key, char *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_end()


cdef extern from "openssl/core_names.h":
    const char *OSSL_MAC_PARAM_DIGEST


cdef extern from "openssl/evp.h":
    ctypedef struct EVP_MAC
    ctypedef struct EVP_MAC_CTX
    EVP_MAC *EVP_MAC_fetch(void *libctx, const char *algorithm, const char *properties)
    void EVP_MAC_free(EVP_MAC *mac)
    EVP_MAC_CTX *EVP_MAC_CTX_new(EVP_MAC *mac)
    void EVP_MAC_CTX_free(EVP_MAC_CTX *ctx)
    int EVP_MAC_CTX_set_params(EVP_MAC_CTX *ctx, const OSSL_PARAM params[])
    int EVP_MAC_init(EVP_MAC_CTX *ctx, const unsigned char *key, size_t keylen,
                     const OSSL_PARAM params[])
    int EVP_MAC_update(EVP_MAC_CTX *ctx, const unsigned char *data, size_t datalen)
    int EVP_MAC_final(EVP_MAC_CTX *ctx, unsigned char *out, size_t *outl, size_t outsize)


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
