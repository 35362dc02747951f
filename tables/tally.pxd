# The C declarations of tally.py's Tally (Cython reads this file beside tally.py when it
# compiles it), so that the row builder (columns.py) counts each row with a C call.

cimport cython


@cython.final
cdef class Tally:
    # The first TALLY_SLOTS values and their counts, then a dict.
    cdef list values
    cdef long long[::1] counts
    cdef dict more

    cdef int count(self, object value) except -1
