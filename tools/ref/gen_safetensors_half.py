"""gen_safetensors_half: bfloat16 and float16 tensors in a safetensors file
written by an independent writer (struct + json; torch 1.13's own bytes of
the tensors, viewed as int16), for kiln's loader test
(tests/fixtures/torch_half.safetensors + torch_half.json, read by
tests/test_checkpoint_half.c).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_safetensors_half.py
Tensors: "w" a bfloat16 [3, 4] (torch.randn rounded by torch's bfloat16
conversion) and "h" a float16 [6] with special values (inf, -0, the smallest
subnormal, the largest finite, NaN, a rounded value).
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures")

w = refgen.randn(3, 4).to(torch.bfloat16)
h = torch.tensor([float("inf"), -0.0, 2.0 ** -24, 65504.0, float("nan"), 0.1],
                 dtype=torch.float16)
tensors = {"w": (w, "BF16"), "h": (h, "F16")}

header, blobs, offset = {"__metadata__": {"writer": "gen_safetensors_half.py"}}, [], 0
for name, (t, tag) in tensors.items():
    raw = t.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    header[name] = {"dtype": tag, "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
js = json.dumps(header).encode()
js += b" " * (-len(js) % 8)
with open(os.path.join(OUT, "torch_half.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(js)))
    f.write(js)
    for b in blobs:
        f.write(b)

cases = [refgen.case("torch_half", "load", [], [w, h], params={"names": ["w", "h"]})]
refgen.write("torch_half", cases, generator="gen_safetensors_half.py")
