from pwcap.capture.layers.cursor cimport Cursor

cdef int geneve(Cursor c) except? -99
