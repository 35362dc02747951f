cimport cython

# The C declarations of schedule.py's OpenSSL calls (Cython reads this file beside
# schedule.py when it compiles it): HKDF-Expand-Label by OpenSSL's TLS 1.3 KDF.

cdef extern from "openssl/params.h":
    ctypedef struct OSSL_PARAM:
        pass
    OSSL_PARAM OSSL_PARAM_construct_int(const char *key, int *buf)
    OSSL_PARAM OSSL_PARAM_construct_utf8_string(const char *key, char *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_octet_string(const char *key, void *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_end()


cdef extern from "openssl/core_names.h":
    const char *OSSL_KDF_PARAM_MODE
    const char *OSSL_KDF_PARAM_DIGEST
    const char *OSSL_KDF_PARAM_KEY
    const char *OSSL_KDF_PARAM_PREFIX
    const char *OSSL_KDF_PARAM_LABEL
    const char *OSSL_KDF_PARAM_DATA
    const char *OSSL_KDF_NAME_TLS1_3_KDF


cdef extern from "openssl/kdf.h":
    ctypedef struct EVP_KDF
    ctypedef struct EVP_KDF_CTX
    int EVP_KDF_HKDF_MODE_EXPAND_ONLY
    EVP_KDF *EVP_KDF_fetch(void *libctx, const char *algorithm, const char *properties)
    void EVP_KDF_free(EVP_KDF *kdf)
    EVP_KDF_CTX *EVP_KDF_CTX_new(EVP_KDF *kdf)
    void EVP_KDF_CTX_free(EVP_KDF_CTX *ctx)
    int EVP_KDF_CTX_set_params(EVP_KDF_CTX *ctx, const OSSL_PARAM params[])
    int EVP_KDF_derive(EVP_KDF_CTX *ctx, unsigned char *key, size_t keylen,
                       const OSSL_PARAM params[])


cdef OSSL_PARAM _octets(const char *name, bytes value)
cdef OSSL_PARAM _text(const char *name, bytes value)


cdef class _ExpandLabel:
    cdef EVP_KDF_CTX *_ctx
    cdef int _mode
    cdef bytes _digest
    cdef OSSL_PARAM _params[5]

    @cython.locals(out=bytes)
    cpdef object derive(self, bytes secret, bytes label, bytes context, Py_ssize_t length)
