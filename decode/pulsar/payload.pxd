# The C declarations of payload.py's entry parser and its u32 reader (Cython reads this
# file beside payload.py when it compiles it), so that the entry decoder (messages.py) and
# the batch reader (batch.py) call them as C, not through a Python call.

cpdef parse_entry(bytes buf, Py_ssize_t start, Py_ssize_t end)
cdef Py_ssize_t u32(bytes buf, Py_ssize_t pos) except? -1
