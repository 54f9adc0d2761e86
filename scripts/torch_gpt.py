"""The PyTorch twin of zinf's GPT-like model (libengine/model/gpt.h).

What it is: a plain torch.nn.Module with the same architecture, the same parameter names and the
same initialisation rule as zinf::model::Gpt, so that (a) scripts/fixtures/make_gpt_fixture.py can
produce reference losses and gradients for the C++ tests and (b) throughput benchmarks can train
the same network in PyTorch side by side with zinf.
What it is not: a tuned model. On the CPU attention is written out by hand (a masked softmax over
a [T, T] score matrix) because torch 1.13 has no scaled_dot_product_attention; on a GPU with a torch
that has it, F.scaled_dot_product_attention(is_causal=True) runs instead (PyTorch's fused flash
attention, the fair baseline there). GELU is the tanh approximation, exactly as kernels/gelu.h
computes it.

Architecture (pre-LN GPT-2): x = wte[tokens] + wpe[0:T]; per block
  x = x + attn.proj(attention(attn.qkv(ln1(x))));  x = x + mlp.proj(gelu(mlp.fc(ln2(x))))
then lnf, and logits = lnf(x) @ head.weight^T where head.weight is wte when the embeddings are tied.
The fused qkv output is laid out [q | k | v] along the features, head h owning columns
h*hs .. h*hs+hs-1 of each (kernels/attention.h). Loss: mean cross-entropy over all B*T positions.

Parameter names: wte, wpe, blocks.{i}.ln1.weight|bias, blocks.{i}.attn.qkv.weight|bias,
blocks.{i}.attn.proj.weight|bias, blocks.{i}.ln2.weight|bias, blocks.{i}.mlp.fc.weight|bias,
blocks.{i}.mlp.proj.weight|bias, lnf.weight|bias, head.weight (untied only).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, qkv_bias, attn_out_bias):
        super().__init__()
        if hidden % heads != 0:
            raise ValueError(f"heads: {heads} does not divide hidden {hidden}")
        self.hidden = hidden
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=qkv_bias)
        self.proj = nn.Linear(hidden, hidden, bias=attn_out_bias)

    def forward(self, x):
        b, t, c = x.shape
        hs = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        # [B, T, C] -> [B, NH, T, hs]
        q = q.view(b, t, self.heads, hs).transpose(1, 2)
        k = k.view(b, t, self.heads, hs).transpose(1, 2)
        v = v.view(b, t, self.heads, hs).transpose(1, 2)
        if x.is_cuda and hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Mlp(nn.Module):
    def __init__(self, hidden, mlp_bias):
        super().__init__()
        self.fc = nn.Linear(hidden, 4 * hidden, bias=mlp_bias)
        self.proj = nn.Linear(4 * hidden, hidden, bias=mlp_bias)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, hidden, heads, qkv_bias, attn_out_bias, mlp_bias):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attn = CausalSelfAttention(hidden, heads, qkv_bias, attn_out_bias)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.mlp = Mlp(hidden, mlp_bias)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TorchGPT(nn.Module):
    def __init__(self, layers, hidden, heads, vocab, max_positions, tied_embeddings=True, qkv_bias=True,
                 attn_out_bias=True, mlp_bias=True):
        super().__init__()
        self.layers = layers
        self.max_positions = max_positions
        self.tied_embeddings = tied_embeddings
        self.wte = nn.Parameter(torch.empty(vocab, hidden))
        self.wpe = nn.Parameter(torch.empty(max_positions, hidden))
        self.blocks = nn.ModuleList(
            [Block(hidden, heads, qkv_bias, attn_out_bias, mlp_bias) for _ in range(layers)])
        self.lnf = nn.LayerNorm(hidden, eps=1e-5)
        if not tied_embeddings:
            self.head = nn.Linear(hidden, vocab, bias=False)
        self.reset_parameters()

    def reset_parameters(self, generator=None):
        """GPT-2 / nanoGPT initialisation, the rule zinf's ParamTable uses (not its random stream):
        normal(0, 0.02) for every weight and embedding, 0.02/sqrt(2L) for the two residual
        projections (attn.proj.weight, mlp.proj.weight), zeros for biases, ones/zeros for LayerNorm."""
        residual_std = 0.02 / math.sqrt(2 * self.layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "lnf.weight":
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                elif name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                    p.normal_(0.0, residual_std, generator=generator)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def head_weight(self):
        return self.wte if self.tied_embeddings else self.head.weight

    def forward(self, tokens, targets):
        """tokens, targets: [B, T] int64 (T <= max_positions). Returns the mean cross-entropy."""
        _, t = tokens.shape
        if t > self.max_positions:
            raise ValueError(f"seq: {t} exceeds max_positions {self.max_positions}")
        x = self.wte[tokens] + self.wpe[:t]
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.head_weight().t()
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
