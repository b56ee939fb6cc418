"""One launch each of torch.softmax and duet.softmax on the same float32
input, for Nsight Compute to compare (bench/NOTES.md): run under
`ncu -k regex:'softmax|group_rows' --launch-skip 4 --launch-count 2`."""
import sys

import torch

import duet

n = int(sys.argv[1]) if len(sys.argv) > 1 else 128
x = torch.randn(int(256e6 / (4 * n)), n, device="cuda")
y = torch.empty_like(x)
for _ in range(3):
    torch.softmax(x, -1)
    duet.softmax(x, out=y)
torch.cuda.synchronize()
torch.softmax(x, -1)
duet.softmax(x, out=y)
torch.cuda.synchronize()
