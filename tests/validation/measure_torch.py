#!/usr/bin/env python3
"""Measures on a machine with PyTorch and one NVIDIA GPU what pipesim's framework and hardware files cite as
measurements (run by hand where a GPU is at hand; it wrote hf_h200.json):

  runtime   GPU memory a training process holds beyond its tensors: the CUDA context, cuBLAS's workspace, a
            one-rank NCCL communicator; and the caching allocator's reserve over its peak in a step
  gemm      cuBLAS bf16 TFLOP/s of the GEMMs of GPT-2 (hidden 768) and Qwen3-1.7B blocks, forward and both
            backward layouts, on random operands
  dispatch  CPU time eager PyTorch spends issuing one small element-wise op, and one nn.Linear forward
  hf        HF transformers training steps, eager and under torch.compile, in the method of hf_eager_h100.json
            (random init, SDPA, fp32 parameters under bf16 autocast, fused AdamW, loss/M accumulated over M
            microbatches, 2 warm-up steps, median of 5 timed); a kernel table of one profiled step of each

Usage: measure_torch.py PART [PART ...] --out FILE [--configs DIR] [--inductor-code TAR]
"""
import argparse
import json
import os
import statistics
import sys
import tarfile
import time

import torch

CASES = (  # name, config, seq, micro-batch, microbatches
    ("qwen3-1.7b s2048 b1", "Qwen__Qwen3-1.7B.json", 2048, 1, 4),
    ("gpt2 s1024 b16", "gpt2.json", 1024, 16, 4),
)


def mib(b):
    return round(b / 2**20, 1)


def runtime_memory():
    free, total = torch.cuda.mem_get_info()  # the first call creates the primary context
    out = {"total_bytes": total, "context_bytes": total - free}
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    free2, _ = torch.cuda.mem_get_info()
    reserved2 = torch.cuda.memory_reserved()
    out["cublas_and_first_tensors_bytes"] = (free - free2) - reserved2
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        free3, _ = torch.cuda.mem_get_info()
        out["nccl_one_rank_bytes"] = (free2 - free3) - (torch.cuda.memory_reserved() - reserved2)
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - record why
        out["nccl_error"] = str(e).splitlines()[0]
    out["note"] = "mem_get_info differences; tensors' own reserve subtracted"
    print("runtime:", {k: (mib(v) if isinstance(v, int) else v) for k, v in out.items()})
    return out


def gemm_tflops(m, n, k, layout):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    sets = max(1, min(16, int(4 * 60e6 // (2 * (m * k + k * n + m * n)) + 1)))  # beyond 4x L2
    ops = []
    for _ in range(sets):
        if layout == "fwd":  # Y[m,n] = X[m,k] W[n,k]^T
            ops.append((torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g),
                        torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g).t()))
        elif layout == "dgrad":  # dX[m,k] = dY[m,n] W[n,k]
            ops.append((torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=g),
                        torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)))
        else:  # wgrad: dW[n,k] = dY[m,n]^T X[m,k]
            ops.append((torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=g).t(),
                        torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)))
    for a, b in ops * 3:
        a @ b
    runs = 20
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(runs):
        a, b = ops[i % len(ops)]
        a @ b
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / runs
    return round(2 * m * n * k / ms / 1e9, 1), round(ms * 1000, 1)


def gemms():
    # heat the GPU to its power-limited clock first
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < 2:
        x @ x
    torch.cuda.synchronize()
    shapes = {"gpt2": (16384, [(2304, 768), (768, 768), (3072, 768), (768, 3072), (50257, 768)]),
              "qwen3-1.7b": (2048, [(4096, 2048), (2048, 2048), (12288, 2048), (2048, 6144), (151936, 2048)]),
              "qwen3-1.7b-8k": (8192, [(4096, 2048), (2048, 2048), (12288, 2048), (2048, 6144)])}
    rows = []
    for model, (m, nks) in shapes.items():
        for n, k in nks:
            for layout in ("fwd", "dgrad", "wgrad"):
                tflops, us = gemm_tflops(m, n, k, layout)
                rows.append({"model": model, "m": m, "n": n, "k": k, "layout": layout, "tflops": tflops, "us": us})
                print(f"gemm {model} {m}x{n}x{k} {layout}: {tflops} TFLOP/s ({us} us)")
        torch.cuda.empty_cache()
    x8 = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    rows.append({"model": "square", "m": 8192, "n": 8192, "k": 8192, "layout": "fwd",
                 "tflops": gemm_tflops(8192, 8192, 8192, "fwd")[0]})
    del x, x8
    return rows


def dispatch():
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    lin = torch.nn.Linear(64, 64, device="cuda")
    xin = torch.randn(8, 64, device="cuda")
    out = {}
    for name, fn, n in (("add_out_us", lambda: torch.add(a, b, out=c), 20000),
                        ("add_new_tensor_us", lambda: a + b, 20000),
                        ("linear_forward_us", lambda: lin(xin), 10000)):
        for _ in range(1000):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out[name] = round((time.perf_counter() - t0) / n * 1e6, 2)
        torch.cuda.synchronize()
    print("dispatch:", out)
    return out


def kernel_table(prof):
    by = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            row = by.setdefault(e.name[:160], [0, 0.0])
            row[0] += 1
            row[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    rows = sorted(([n, c, round(t)] for n, (c, t) in by.items()), key=lambda r: -r[2])
    return {"kernels": sum(r[1] for r in rows), "kernel_time_us": sum(r[2] for r in rows), "by_name": rows[:400]}


def hf_case(configs, case, compiled):
    import transformers
    name, config_file, seq, mb, micro = case
    with open(os.path.join(configs, config_file)) as f:
        fields = json.load(f)
    cfg = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").float().cuda()
    model.config.use_cache = False
    model.train()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = [torch.randint(0, cfg.vocab_size, (mb, seq), device="cuda", generator=g) for _ in range(micro)]

    def step():
        for x in ids:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = run(input_ids=x, labels=x).loss / micro
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    row = {"case": name, "config": config_file, "seq": seq, "micro_batch": mb, "microbatches": micro,
           "compiled": compiled, "params": sum(p.numel() for p in model.parameters()),
           "step_s_median": statistics.median(times), "step_s_min": min(times), "step_s_max": max(times),
           "warmup_s": round(warm_s, 1), "peak_alloc_bytes": torch.cuda.max_memory_allocated(),
           "peak_reserved_bytes": torch.cuda.max_memory_reserved()}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    row["profiled_step"] = kernel_table(prof)
    print(f"hf {name} compiled={compiled}: {row['step_s_median']:.4f} s, peak {mib(row['peak_alloc_bytes'])} MiB, "
          f"{row['profiled_step']['kernels']} kernels, warm-up {row['warmup_s']} s", flush=True)
    del model, run, opt
    torch.cuda.empty_cache()
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("parts", nargs="+", choices=["runtime", "gemm", "dispatch", "hf"])
    p.add_argument("--out", required=True)
    p.add_argument("--configs", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf"))
    p.add_argument("--inductor-code")
    args = p.parse_args()
    import transformers
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "transformers": transformers.__version__, "cudnn": torch.backends.cudnn.version()}

    def save():
        with open(args.out + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(args.out + ".tmp", args.out)

    for part in args.parts:
        try:
            if part == "runtime":
                result["runtime"] = runtime_memory()
            elif part == "gemm":
                result["gemm"] = gemms()
            elif part == "dispatch":
                result["dispatch"] = dispatch()
            else:
                result["hf"] = []
                for compiled, case in ((False, CASES[0]), (False, CASES[1]), (True, CASES[1]), (True, CASES[0])):
                    try:
                        result["hf"].append(hf_case(args.configs, case, compiled))
                    except Exception as e:  # noqa: BLE001 - keep the other cases
                        result["hf"].append({"case": case[0], "compiled": compiled, "error": repr(e)[:2000]})
                        print(f"measure_torch: {case[0]} compiled={compiled}: {e!r}"[:2000], file=sys.stderr)
                        torch.cuda.empty_cache()
                    save()
        except Exception as e:  # noqa: BLE001 - keep what the other parts measured
            result[part + "_error"] = repr(e)[:2000]
            print(f"measure_torch: {part}: {e!r}"[:2000], file=sys.stderr)
        save()
    if args.inductor_code:
        root = os.path.join("/tmp", "torchinductor_" + os.environ.get("USER", "root"))
        with tarfile.open(args.inductor_code, "w:gz") as tar:
            for d, _, files in os.walk(root):
                for f in files:
                    if f.endswith(".py"):
                        tar.add(os.path.join(d, f), arcname=os.path.relpath(os.path.join(d, f), root))


if __name__ == "__main__":
    main()
