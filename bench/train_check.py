#!/usr/bin/env python3
"""A small transformer trained twice for the same steps on the same data
from the same initial weights: once with duet (attention softmax through
duet.softmax, the output through duet.nn.LogSoftmax), once with torch's
softmax and log_softmax, both under torch.compile(fullgraph=True). The
losses must agree to --tolerance relative at every step, and the duet model
must compile without a graph break. Exit status 1 otherwise.

    python3 bench/train_check.py [--steps 50] [--device cuda] [--json out.json]
"""
import argparse
import json
import math
import sys

import torch

import duet


class Block(torch.nn.Module):
    """Pre-norm causal self-attention and an MLP."""

    def __init__(self, width, heads, softmax):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))
        self.softmax = softmax

    def forward(self, x, mask):
        batch, tokens, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, width // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(width // self.heads) + mask
        attention = self.softmax(scores, dim=-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, tokens, width))
        return x + self.mlp(self.norm2(x))


class Model(torch.nn.Module):
    def __init__(self, vocab, width, heads, layers, tokens, softmax, log_softmax):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Parameter(torch.randn(tokens, width) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(width, heads, softmax) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)
        self.log_softmax = log_softmax
        self.register_buffer("mask", torch.full((tokens, tokens), float("-inf")).triu(1), persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        log_probs = self.log_softmax(self.head(self.norm(x)))
        return torch.nn.functional.nll_loss(log_probs.flatten(0, 1), targets.flatten())


def batches(steps, batch, tokens, vocab, device, seed):
    """Sequences with a learnable rule: each token follows from the previous one."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    for _ in range(steps):
        first = torch.randint(0, vocab, (batch, 1), generator=g)
        seq = (first * torch.arange(1, tokens + 2) * 7 + 3) % vocab
        noise = torch.randint(0, vocab, seq.shape, generator=g)
        seq = torch.where(torch.rand(seq.shape, generator=g) < 0.1, noise, seq)
        yield seq[:, :-1].to(device), seq[:, 1:].to(device)


def train(model, args):
    compiled = torch.compile(model, fullgraph=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses = []
    for tokens, targets in batches(args.steps, args.batch, args.tokens, args.vocab, args.device, seed=1):
        optimizer.zero_grad(set_to_none=True)
        loss = compiled(tokens, targets)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--json", help="write the losses and the verdict here")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # both runs in float32 arithmetic
    torch.backends.cudnn.allow_tf32 = False

    def build(softmax, log_softmax):
        torch.manual_seed(0)
        return Model(args.vocab, args.width, args.heads, args.layers, args.tokens, softmax,
                     log_softmax).to(args.device)

    with_duet = build(duet.softmax, duet.nn.LogSoftmax(dim=-1))
    with_torch = build(torch.softmax, torch.nn.LogSoftmax(dim=-1))
    tokens, targets = next(batches(1, args.batch, args.tokens, args.vocab, args.device, seed=1))
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(with_duet)(tokens, targets)
    graph_breaks = explanation.graph_break_count
    torch._dynamo.reset()
    duet_losses = train(with_duet, args)
    torch_losses = train(with_torch, args)
    relative = [abs(a - b) / abs(b) for a, b in zip(duet_losses, torch_losses)]
    for step, (a, b, r) in enumerate(zip(duet_losses, torch_losses, relative)):
        print(f"step {step:3d}: duet {a:.6f} torch {b:.6f} relative {r:.2e}")
    worst = max(relative)
    ok = graph_breaks == 0 and worst <= args.tolerance and duet_losses[-1] < duet_losses[0]
    print(f"{args.steps} steps on {args.device} (torch {torch.__version__}): graph breaks {graph_breaks}, "
          f"loss {duet_losses[0]:.4f} -> {duet_losses[-1]:.4f}, worst relative difference {worst:.2e} "
          f"(tolerance {args.tolerance:g}): {'PASS' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "torch": torch.__version__, "duet": duet.__version__,
                       "graph_breaks": graph_breaks, "duet_losses": duet_losses, "torch_losses": torch_losses,
                       "worst_relative": worst, "pass": ok}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
