# The C declarations of the OpenSSL 3 calls the compiled modules make themselves (digest.py's
# SHA-256, tls/protection.py's record ciphers, tls/schedule.py's HMAC), in one place: each
# module cimports what it uses, so no declaration is written twice. Nothing here is a
# module of its own.

cdef extern from "openssl/params.h":
    ctypedef struct OSSL_PARAM:
        pass
    OSSL_PARAM OSSL_PARAM_construct_octet_string(const char *key, void *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_utf8_string(const char *key, char *buf, size_t bsize)
    OSSL_PARAM OSSL_PARAM_construct_end()


cdef extern from "openssl/core_names.h":
    const char *OSSL_CIPHER_PARAM_AEAD_TAG
    const char *OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED
    const char *OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV
    const char *OSSL_MAC_PARAM_DIGEST


cdef extern from "openssl/evp.h":
    ctypedef struct EVP_MD
    ctypedef struct EVP_MD_CTX
    EVP_MD *EVP_MD_fetch(void *libctx, const char *algorithm, const char *properties)
    EVP_MD_CTX *EVP_MD_CTX_new()
    int EVP_DigestInit_ex2(EVP_MD_CTX *ctx, const EVP_MD *kind, const void *params)
    int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *data, size_t count)
    int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *digest, unsigned int *size)

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
