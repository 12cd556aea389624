#!/usr/bin/env python3
"""Measures the fused attention kernels PyTorch runs (scaled_dot_product_attention's flash, cuDNN and
memory-efficient back ends) on this machine's first GPU: forward and backward TFLOP/s by head dim and sequence
length, causal, bf16, batch x sequence = 16k tokens at hidden 2048 (the shapes of the FlashAttention papers), and
writes them as a hardware profile's `gpu.attention_kernels` with their source.

Usage: attention_rates.py --out RATES.json [--profile IN.json --profile-out OUT.json] [--quick]
  RATES.json   {"format": "pipesim-attention-kernels", "kernels": {NAME: {"source", "points": [...]}}}
  --profile    also writes IN.json with these kernels as its gpu.attention_kernels into OUT.json
Kernel names are those frameworks name: flash-attn-2 (PyTorch's flash back end is FlashAttention-2's kernel),
cudnn, mem-efficient. FLOPs as the papers count them: forward 4 s^2 d per head, halved under the causal mask;
backward 2.5 times the forward. Times are CUDA-event means of 10 runs after 3 warm-ups on random operands.
Needs PyTorch with CUDA; gpu_selftest.sh runs it where python3 has it.
"""
import argparse
import json
import os
import sys

HIDDEN = 2048
TOKENS = 16384
HEAD_DIMS = (64, 128)
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
KERNELS = (("flash-attn-2", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("mem-efficient", "EFFICIENT_ATTENTION"))


def mean_ms(torch, fn, warmups=3, runs=10):
    for _ in range(warmups):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(runs):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / runs


def measure_point(torch, backend, head_dim, seq):
    from torch.nn.attention import sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    batch, heads = max(1, TOKENS // seq), HIDDEN // head_dim
    gen = torch.Generator(device="cuda").manual_seed(1234 + seq + head_dim)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
               .requires_grad_(True) for _ in range(3))
    grad = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
    with sdpa_kernel([backend]):
        forward_ms = mean_ms(torch, lambda: sdpa(q, k, v, is_causal=True))
        out = sdpa(q, k, v, is_causal=True)
        backward_ms = mean_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True))
    forward_flops = 4 * batch * heads * seq * seq * head_dim / 2
    return {"head_dim": head_dim, "seq": seq, "forward_tflops": round(forward_flops / forward_ms / 1e9, 1),
            "backward_tflops": round(2.5 * forward_flops / backward_ms / 1e9, 1)}


def measure(quick):
    import torch
    from torch.nn.attention import SDPBackend
    device = torch.cuda.get_device_name(0)
    setup = (f"measured by calibrate/pytorch/attention_rates.py on {device}, PyTorch {torch.__version__}, "
             f"cuDNN {torch.backends.cudnn.version()}: torch.nn.functional.scaled_dot_product_attention with "
             f"is_causal=True under sdpa_kernel(SDPBackend.{{}}), bf16, batch x sequence = {TOKENS} tokens, hidden "
             f"{HIDDEN}; CUDA-event mean of 10 runs after 3 warm-ups, random operands; FLOPs: causal forward half of "
             f"4 s^2 d per head, backward 2.5 times the forward")
    kernels = {}
    for name, backend_name in KERNELS:
        backend, points = getattr(SDPBackend, backend_name), []
        for head_dim in HEAD_DIMS:
            for seq in (SEQS[1:4] if quick else SEQS):
                try:
                    points.append(measure_point(torch, backend, head_dim, seq))
                except RuntimeError as e:  # a back end that does not run this shape here
                    print(f"attention_rates: {name} d{head_dim} s{seq}: {str(e).splitlines()[0]}", file=sys.stderr)
                torch.cuda.empty_cache()
        if points:
            kernels[name] = {"source": setup.format(backend_name), "points": points}
            print(f"attention_rates: {name}: " + ", ".join(
                f"d{p['head_dim']} s{p['seq']} {p['forward_tflops']:.0f}/{p['backward_tflops']:.0f}" for p in points))
    return kernels


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--profile")
    parser.add_argument("--profile-out")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if bool(args.profile) != bool(args.profile_out):
        parser.error("--profile and --profile-out go together")
    kernels = measure(args.quick)
    if not kernels:
        sys.exit("attention_rates: no attention back end ran on this GPU")
    write_json(args.out, {"format": "pipesim-attention-kernels", "version": 1, "kernels": kernels})
    if args.profile:
        with open(args.profile) as f:
            profile = json.load(f)
        profile["gpu"]["attention_kernels"] = kernels
        write_json(args.profile_out, profile)


if __name__ == "__main__":
    main()
