from pwcap.capture.layers.cursor cimport Cursor

cdef int udp(Cursor c, bytes tunnels) except? -99
