from pwcap.capture.layers.cursor cimport Cursor

cdef int erspan2(Cursor c) except? -99
cdef int erspan3(Cursor c) except? -99
