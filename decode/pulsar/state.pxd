# The C declarations of state.py's merge_names and permit functions (Cython reads this
# file beside state.py when it compiles it), so that the decoder (decoder.py) merges a
# frame's names and charges a delivery with C calls.

from pwcap.tables.columns cimport ColumnBuffer

cpdef void merge_names(ColumnBuffer rows, dict names, bint keep_row_values)
cpdef void grant(dict consumers, object consumer_id, object permits)
cpdef object spend(dict consumers, object consumer_id, object messages)
