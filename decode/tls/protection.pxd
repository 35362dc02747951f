# The C declarations of protection.py's classes (Cython reads this file beside
# protection.py when it compiles it), so that the record walk (stream.py) calls a
# direction's `open` as C, and each class keeps its cipher and buffers in C fields.

cdef extern from "openssl/params.h":
    ctypedef struct OSSL_PARAM:
        pass
    OSSL_PARAM OSSL_PARAM_construct_octet_string(const char *key, void *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_end()


cdef extern from "openssl/core_names.h":
    const char *OSSL_CIPHER_PARAM_AEAD_TAG
    const char *OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED
    const char *OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV


cdef extern from "openssl/evp.h":
    ctypedef struct EVP_CIPHER
    ctypedef struct EVP_CIPHER_CTX
    int EVP_CTRL_AEAD_SET_TAG
    EVP_CIPHER *EVP_CIPHER_fetch(void *libctx, const char *algorithm, const char *properties)
    void EVP_CIPHER_free(EVP_CIPHER *cipher)
    int EVP_CIPHER_get_key_length(const EVP_CIPHER *cipher)
    EVP_CIPHER_CTX *EVP_CIPHER_CTX_new()
    void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx)
    int EVP_DecryptInit_ex2(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher,
                            const unsigned char *key, const unsigned char *iv, const void *params)
    int EVP_DecryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                          const unsigned char *data, int size)
    int EVP_DecryptFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl)
    int EVP_CIPHER_CTX_ctrl(EVP_CIPHER_CTX *ctx, int kind, int arg, void *ptr)
    int EVP_CIPHER_CTX_set_params(EVP_CIPHER_CTX *ctx, const OSSL_PARAM params[])


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
