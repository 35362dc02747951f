from pwcap.capture.layers.cursor cimport Cursor

cdef int vxlan(Cursor c) except? -99
