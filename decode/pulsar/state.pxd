# The C declaration of state.py's merge_names (Cython reads this file beside state.py when
# it compiles it), so that the decoder (decoder.py) merges a frame's names with a C call.

from pwcap.tables.columns cimport ColumnBuffer

cpdef void merge_names(ColumnBuffer rows, dict names, bint keep_row_values)
