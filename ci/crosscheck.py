"""Issue-2 evidence on the GPU machine, not a project dependency (torch is only on that image).

1. The seed kernel's spread across separate processes: `gemm bench -k 05` at 2048/4096/8192
   run in RUNS fresh processes; the spread of their medians, (max - min) / median.
2. cuBLAS as the suite measures it (nvmath-python, PEDANTIC FP32) against an independent
   measurement: torch.mm with TF32 off, timed with torch's CUDA events in batches of
   back-to-back launches, in the same job. They should agree within 2 %.
Writes crosscheck.json into the directory given as argv[1] and prints two tables.
"""
import json
import os
import subprocess
import sys

RUNS = 3
SIZES = ["2048", "4096", "8192"]


def bench(out_dir, i):
    path = os.path.join(out_dir, f"bench_05_run{i}.json")
    subprocess.run([sys.executable, "-m", "gemm", "bench", "-k", "05", "--sizes", *SIZES,
                    "--json", path], check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        data = json.load(f)
    os.remove(path)
    return data


def torch_tflops(n, reps=20, batches=15):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    b = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            torch.mm(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / reps)
    times.sort()
    return 2 * n**3 / times[len(times) // 2] / 1e12


def main():
    from gemm.cli.tables import table
    from gemm.core.metrics import baseline_values, values
    from gemm.core.stats import median, min_max_spread
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    runs = [bench(out_dir, i) for i in range(RUNS)]
    rows, report = [], {"spread": {}, "cublas_vs_torch": {}}
    for size in SIZES:
        ks, bs = [], []
        for r in runs:
            rec = next(x for x in r["records"] if x["size"] == size)
            ks.append(values(rec)["tflops"])
            bs.append(baseline_values(rec)["tflops"])
        report["spread"][size] = {"kernel_tflops": ks, "cublas_tflops": bs,
                                  "kernel_spread": min_max_spread(ks), "cublas_spread": min_max_spread(bs)}
        rows.append([size, " / ".join(f"{k:.3f}" for k in ks), f"{100 * min_max_spread(ks):.3f} %",
                     " / ".join(f"{b:.2f}" for b in bs), f"{100 * min_max_spread(bs):.3f} %"])
    print(f"05_2d_blocktiling in {RUNS} separate processes (TFLOPS per process, spread of medians)")
    print(table(["size", "kernel TFLOPS", "spread", "cuBLAS TFLOPS", "spread"], rows))
    rows = []
    for size in SIZES:
        ours = median(report["spread"][size]["cublas_tflops"])
        theirs = torch_tflops(int(size))
        diff = (ours - theirs) / theirs
        report["cublas_vs_torch"][size] = {"nvmath_cublas": ours, "torch_mm": theirs, "diff": diff}
        rows.append([size, f"{ours:.2f}", f"{theirs:.2f}", f"{100 * diff:+.2f} %",
                     "ok" if abs(diff) <= 0.02 else "DISAGREE"])
    print("\ncuBLAS FP32 (suite, nvmath PEDANTIC) vs torch.mm (TF32 off), TFLOPS")
    print(table(["size", "suite cuBLAS", "torch.mm", "difference", "within 2 %"], rows))
    with open(os.path.join(out_dir, "crosscheck.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
