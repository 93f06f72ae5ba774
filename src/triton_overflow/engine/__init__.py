"""The huge-run engine: one case past 2**31 elements, run in a child process and reported as an
``Outcome``.

``runner`` drives a case (memory, planted rows, launch, check) and ``isolation`` runs it in a
child forked from a server, so that a fault is the child's alone; ``memory`` says where a huge
tensor comes from (each backend a ``MemoryBackend``), ``devices`` which GPU runs it and the
memory budget the processes of a run share, ``huge`` the geometry of the wrap, ``case_static``
the static tier of one case, ``gpu_compile`` the sm_90 compile on a CPU, ``session_values`` the
values the processes of one pytest session compute once, ``machine`` the facts of the machine a
run ran on.

The engine knows nothing of pytest's outcomes: the pytest side (``triton_overflow.plugin``)
turns its outcomes into passes, failures and skips.
"""
