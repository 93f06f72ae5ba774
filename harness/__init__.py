"""Shared machinery of the overflow suite: point it at any Triton kernel module.

One concern per module:

* ``memory``: how huge tensors are obtained (dense GPU memory, lazy CPU memory) and the
  free-memory gate with its skip reason;
* ``huge``: the geometry of a huge case: which rows wrap, where a wrap lands, which rows a case
  plants, poisons and compares;
* ``isolation``: run a case in a child process, so that a fault never reaches another test;
* ``lint``: the static check of TTIR for i32 products that feed pointer offsets;
* ``interp``: interpreter hooks (only some program ids; i32 wrap checking);
* ``twin``: the int32 twin of a kernel module, derived from its source;
* ``compare``: row comparisons that say where they differ, relative to 2**31;
* ``validate``: the validation report (``python -m harness validate``).
"""
