# The C declarations of digest.py (Cython reads this file beside digest.py when it compiles
# it): the one context of OpenSSL's digest interface (EVP: openssl.pxd), the library
# hashlib itself uses, that every digest of the process re-initialises.

from pwcap.decode.openssl cimport EVP_MD, EVP_MD_CTX
from pwcap.tables.columns cimport ColumnBuffer


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
