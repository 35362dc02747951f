from pwcap.capture.layers.cursor cimport Cursor

cdef int mpls(Cursor c) except? -99
cdef bint _frame(Cursor c, Py_ssize_t at) except -1
