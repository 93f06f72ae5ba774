"""A small launch of the count-penalty kernel, as a team's own quick test makes it: recorded
with `triton-overflow record`, it is what `triton-overflow repro --launches` starts from."""

import torch

from myengine.penalty import _count_penalty_kernel

rows, vocab, slots = 3, 2048, 5
logits = torch.randn(rows, vocab)
counts = torch.randint(0, 4, (slots, vocab), dtype=torch.int32)
slot_of_row = torch.tensor([4, 0, 2], dtype=torch.int32)
penalties = torch.full((rows, ), 0.5)
try:
    _count_penalty_kernel[(rows, )](logits, logits.stride(0), counts, counts.stride(0),
                                    slot_of_row, penalties, rows, vocab, WIDEN=False,
                                    BLOCK=1024)
except Exception as error:  # the interpreter without the suite lacks libdevice's log1p
    print(f"small launch: the kernel did not finish here ({type(error).__name__}); its launch "
          "was recorded all the same")
