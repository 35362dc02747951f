# The C declaration of keylog.py's comparator, read by Cython beside keylog.py: libc's
# qsort takes a C function of const pointers, which pure-Python mode cannot spell.

cdef int _ascending(const void *left, const void *right) noexcept nogil
