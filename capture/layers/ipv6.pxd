from pwcap.capture.layers.cursor cimport Cursor
from pwcap.capture.layers.fragments cimport Fragments

cdef int ipv6(Cursor c, Fragments fragments) except? -99
cdef bint extension(long proto)
