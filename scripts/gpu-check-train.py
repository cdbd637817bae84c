#!/usr/bin/env python3
"""A few training steps of ResNet-50 or GPT-2 small on one GPU, for scripts/gpu-check.sh (issue #31): the step time
measured without the profiler, then a PyTorch profiler trace of a few more steps for `ddlsim import-trace`.

ResNet-50 is torchvision's (weights=None), trained as torchvision's reference recipe does (SGD, momentum 0.9, weight
decay 1e-4, cross-entropy). GPT-2 small is defined below as HF transformers' GPT2LMHeadModel with the `gpt2` config
(12 layers, hidden 768, 12 heads, 1024 positions, vocabulary 50257, dropout 0.1, GELU tanh, eager attention with the
scores materialised, lm_head tied to the token embedding; nn.Linear in place of HF's Conv1D, the same products), as
ddlsim's zoo model `gpt2` describes it (dag/zoo/transformer.cpp), trained with AdamW on random tokens, the loss over
every position. Nothing is downloaded. PyTorch's defaults stand: fp32, TF32 for convolutions but not for matmuls;
cudnn.benchmark is on, as ddlsim-probe's cudnnFind*AlgorithmEx is. Each step copies its batch from pinned host memory.

Measured step: the wall time of one step between two torch.cuda.synchronize() calls, the median over --steps steps
after --warmup; also the mean over --steps steps run back to back (one synchronisation at the end: the steady state,
the host running ahead of the GPU). Then --profile-steps steps under torch.profiler (CPU and CUDA activities, shapes
and Python stacks, so that ddlsim reads Input Dims and the nn.Module annotations; docs/traces.md), after one warm-up
step of the profiler's, written as a gzipped Chrome trace.

Exit status: 0, 1 (a failure on the GPU, with its message), 2 (bad arguments), 3 (no GPU or no torch).
"""

import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=["resnet50", "gpt2"])
    p.add_argument("--batch", type=int, required=True, help="samples (images or sequences of 1024 tokens) per step")
    p.add_argument("--warmup", type=int, default=5, help="steps before any timing (cudnn.benchmark's search)")
    p.add_argument("--steps", type=int, default=20, help="timed steps, each synchronised, then as many back to back")
    p.add_argument("--profile-steps", type=int, default=6,
                   help="profiled steps (import-trace leaves the first out when there are three or more)")
    p.add_argument("--trace", required=True, help="the Chrome trace to write (.json.gz)")
    p.add_argument("--measured", required=True, help="the step times to write (JSON)")
    p.add_argument("--device", default="cuda", help="torch device (cpu runs the same steps, for testing the script)")
    a = p.parse_args()
    if a.batch < 1 or a.warmup < 0 or a.steps < 1 or a.profile_steps < 3:
        p.error("--batch and --steps must be at least 1, --warmup at least 0, --profile-steps at least 3")
    return a


def gpt2_small(torch):
    """GPT-2 small as HF's GPT2LMHeadModel (config `gpt2`), eager attention."""
    nn = torch.nn
    F = torch.nn.functional
    layers, hidden, heads, positions, vocabulary, dropout = 12, 768, 12, 1024, 50257, 0.1

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(hidden, 3 * hidden)
            self.c_proj = nn.Linear(hidden, hidden)
            self.attn_dropout = nn.Dropout(dropout)
            self.resid_dropout = nn.Dropout(dropout)
            self.register_buffer("causal", torch.tril(torch.ones(positions, positions, dtype=torch.bool)),
                                 persistent=False)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.c_attn(x).split(hidden, dim=2)
            q, k, v = (t.view(b, s, heads, h // heads).transpose(1, 2) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // heads)
            scores = torch.where(self.causal[:s, :s], scores, torch.finfo(scores.dtype).min)
            probs = self.attn_dropout(F.softmax(scores, dim=-1))
            context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
            return self.resid_dropout(self.c_proj(context))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(hidden, 4 * hidden)
            self.act = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * hidden, hidden)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.act(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(hidden)
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocabulary, hidden)
            self.wpe = nn.Embedding(positions, hidden)
            self.drop = nn.Dropout(dropout)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocabulary, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as HF ties them
            for m in self.modules():  # HF's _init_weights: N(0, 0.02), biases 0
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, tokens):
            position = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.drop(self.wte(tokens) + self.wpe(position))
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return Gpt2(), vocabulary, positions


def main():
    a = parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"gpu-check-train: no torch ({e})", file=sys.stderr)
        return 3
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu-check-train: no CUDA GPU (torch {torch.__version__} sees none)", file=sys.stderr)
        return 3
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    F = torch.nn.functional

    if a.model == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        host_x = torch.randn(a.batch, 3, 224, 224)
        host_y = torch.randint(0, 1000, (a.batch,))

        def loss_of(x, y):
            return F.cross_entropy(model(x), y)
    else:
        model, vocabulary, positions = gpt2_small(torch)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
        host_x = torch.randint(0, vocabulary, (a.batch, positions))
        host_y = host_x

        def loss_of(x, y):
            logits = model(x)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))

    if cuda:
        host_x, host_y = host_x.pin_memory(), host_y.pin_memory()
    model.to(device).train()

    def step():
        x = host_x.to(device, non_blocking=True)
        y = host_y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        loss.backward()
        optimizer.step()

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(a.warmup):
        step()
    sync()
    steps_s = []
    for _ in range(a.steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        steps_s.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    back_to_back_s = (time.perf_counter() - t0) / a.steps

    from torch.profiler import ProfilerActivity, profile, schedule
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        # the trace is exported when the schedule's active steps end (at the last prof.step())
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=a.profile_steps),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw), record_shapes=True, with_stack=True) as prof:
            for _ in range(1 + a.profile_steps):
                step()
                prof.step()
        if not os.path.exists(raw):
            raise RuntimeError("the profiler exported no trace")
        with open(raw, "rb") as src, gzip.open(a.trace + ".tmp", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
    os.replace(a.trace + ".tmp", a.trace)

    measured = {
        "model": a.model,
        "batch": a.batch,
        "device": torch.cuda.get_device_name(device) if cuda else a.device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32},
        "warmup_steps": a.warmup,
        "step_s": steps_s,
        "median_step_s": statistics.median(steps_s),
        "back_to_back_mean_step_s": back_to_back_s,
        "profiled_steps": a.profile_steps,
        "how": "wall time of one step between torch.cuda.synchronize() calls (median); back to back: the mean over "
               "as many steps with one synchronisation at the end",
    }
    with open(a.measured + ".tmp", "w") as f:
        json.dump(measured, f, indent=1)
        f.write("\n")
    os.replace(a.measured + ".tmp", a.measured)
    print(f"{a.model} batch {a.batch} on {measured['device']}: median step {1e3 * measured['median_step_s']:.2f} ms "
          f"({a.steps} synchronised steps), back to back {1e3 * back_to_back_s:.2f} ms; wrote {a.trace}, {a.measured}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a failure on the GPU (out of memory, a CUDA error): one line, exit 1
        print(f"gpu-check-train: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
