from pwcap.capture.layers.cursor cimport Cursor

cdef int mpls(Cursor c) except? -99
