# The C declarations of arrow_copy.py (Cython reads this file beside it when it compiles
# it), so that the column storages copy their batches out with C calls.

cdef object copy(bytearray buffer, Py_ssize_t start, Py_ssize_t size)
cdef object validity(bytearray flags, Py_ssize_t count)
cdef object flag_bits(bytearray flags, Py_ssize_t start, Py_ssize_t count, Py_ssize_t width)
