from pwcap.capture.layers.cursor cimport Cursor

cdef int gre(Cursor c) except? -99
