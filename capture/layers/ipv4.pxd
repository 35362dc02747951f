from pwcap.capture.layers.cursor cimport Cursor
from pwcap.capture.layers.fragments cimport Fragments

cdef int ipv4(Cursor c, Fragments fragments) except? -99
cdef int carried(Cursor c, long protocol) except? -99
