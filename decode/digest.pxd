# The C declarations of digest.py (Cython reads this file beside digest.py when it compiles
# it): OpenSSL's digest interface (EVP), the library hashlib itself uses, and the one
# context every digest of the process re-initialises.

from pwcap.tables.columns cimport ColumnBuffer

cdef extern from "openssl/evp.h":
    ctypedef struct EVP_MD
    ctypedef struct EVP_MD_CTX
    EVP_MD *EVP_MD_fetch(void *libctx, const char *algorithm, const char *properties)
    EVP_MD_CTX *EVP_MD_CTX_new()
    int EVP_DigestInit_ex2(EVP_MD_CTX *ctx, const EVP_MD *kind, const void *params)
    int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *data, size_t count)
    int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *digest, unsigned int *size)

cdef const EVP_MD *_SHA256
cdef EVP_MD_CTX *_CONTEXT
cdef const unsigned char *_HEX
cdef Py_ssize_t HEX_SIZE

cpdef str sha256_hex(object payload, Py_ssize_t start=*, Py_ssize_t stop=*)
cpdef int set_sha256(ColumnBuffer rows, Py_ssize_t column, object payload, Py_ssize_t start=*,
                     Py_ssize_t stop=*) except -1
cdef Py_ssize_t _checked(object payload, Py_ssize_t start, Py_ssize_t stop) except -1
cdef bint _native()
cdef const unsigned char *_at(object payload, Py_ssize_t start, Py_ssize_t stop) except? NULL
cdef int _hex(const unsigned char *start, Py_ssize_t size, char *text) except -1
