# The C declaration of payload.py's entry parser (Cython reads this file beside payload.py
# when it compiles it), so that the entry decoder (messages.py) calls it as C, not through
# a Python call.

cpdef parse_entry(bytes buf, Py_ssize_t start, Py_ssize_t end)
