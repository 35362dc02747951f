from pwcap.capture.layers.cursor cimport Cursor

cdef int link(Cursor c, long linktype) except? -99
cdef int ip_version(Cursor c) except? -99
cdef int nflog(Cursor c) except? -99
