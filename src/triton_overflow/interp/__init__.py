"""Triton's CPU interpreter, made to run huge cases as a GPU would.

``execution_mode`` chooses where kernels run (the interpreter or the device) for a process and
its children; ``runtime`` patches the interpreter itself (int32 loop variables, grid-stride
loops narrowed to the planted rows, vectorised xor reductions) and knows where each Triton
release keeps its pieces; ``hooks`` runs only the programs that touch the planted rows and
checks every signed int32 operation for a wrap; ``libdevice`` computes ``libdevice`` math with
numpy; ``device_view`` is the GPU a launcher sees while its kernels run here.
"""
