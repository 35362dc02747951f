from pwcap.capture.layers.cursor cimport Cursor

cdef int next_header(long ethertype) except? -99
cdef int ethernet(Cursor c) except? -99
cdef int vlan(Cursor c) except? -99
