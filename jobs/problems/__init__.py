"""The kinds of finding of ``jobs/findings.py``, a module per family; each kind is a
function of :class:`base.Inputs` returning its rows."""
