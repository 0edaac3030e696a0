"""gen_safetensors: a safetensors file written by an independent writer, for
kiln's loader test (tests/fixtures/torch_mlp.safetensors + torch_mlp.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_safetensors.py
The format is written here by hand with struct + json + numpy (no
safetensors package): 8-byte little-endian header length, the JSON header
(keys deliberately not in data order, with __metadata__, padded with spaces
to a multiple of 8), then the raw little-endian tensor bytes.
The model: Sequential(Linear(4, 8), BatchNorm1d(8), ReLU(), Linear(8, 3)),
trained-mode forwards to move the running statistics, then eval; the JSON
holds an input and the model's eval output (kiln-ref-1 format).
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures")
DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8"),
          torch.float64: ("F64", "<f8")}

torch.manual_seed(3)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(16, 4))
model.eval()
x = torch.randn(5, 4)
with torch.no_grad():
    y = model(x)

state = model.state_dict()
names = list(state.keys())
blobs, header, offset = [], {}, 0
for name in reversed(names):  # data in reverse order of the header's keys
    t = state[name]
    tag, npd = DTYPES[t.dtype]
    raw = np.ascontiguousarray(t.numpy()).astype(npd).tobytes()
    header[name] = {"dtype": tag, "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
ordered = {"__metadata__": {"format": "pt", "writer": "gen_safetensors.py"}}
for name in names:
    ordered[name] = header[name]
js = json.dumps(ordered).encode()
js += b" " * (-len(js) % 8)
with open(os.path.join(OUT, "torch_mlp.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(js)))
    f.write(js)
    for b in blobs:
        f.write(b)

cases = [refgen.case("torch_mlp_eval", "Sequential", [x], [y], params={"names": names})]
refgen.write("torch_mlp", cases, generator="gen_safetensors.py")
