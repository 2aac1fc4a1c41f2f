#!/usr/bin/env python3
"""Side-by-side onnxruntime latency of a few model files, for quick A/B checks.

usage: target/venv-peers/bin/python benches/ort_latency.py RUNS MODEL [MODEL ...]

Builds one session per file (CPU, one thread), graph optimizations off (ORT_DISABLE_ALL) and
then on (ORT_ENABLE_ALL), feeds seeded random inputs (dynamic dims as 1, integers in {0, 1}),
and times RUNS rounds round-robin over the files, so load changes hit every file alike. Prints
the median per file and its ratio to the first file's. benches/compare_peers.py is the full
comparison with the peers; this is for a change to one model's output.
"""
import sys, time, statistics, numpy as np, onnxruntime as ort, onnx
runs = int(sys.argv[1]); files = sys.argv[2:]
def feeds(path):
    m = onnx.load(path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    f = {}
    rng = np.random.default_rng(0)
    for i in m.graph.input:
        if i.name in init: continue
        t = i.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dt, np.integer): f[i.name] = rng.integers(0, 2, shape).astype(dt)
        else: f[i.name] = rng.standard_normal(shape).astype(dt)
    return f
for mode, lvl in [("off", ort.GraphOptimizationLevel.ORT_DISABLE_ALL), ("on", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)]:
    sess = []
    for p in files:
        o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1; o.graph_optimization_level = lvl
        s = ort.InferenceSession(p, o, providers=["CPUExecutionProvider"]); fd = feeds(p)
        s.run(None, fd); s.run(None, fd); sess.append((s, fd, []))
    for r in range(runs):
        for s, fd, t in sess:
            t0 = time.perf_counter(); s.run(None, fd); t.append(time.perf_counter() - t0)
    base = statistics.median(sess[0][2])
    print(mode, "  ".join(f"{p.split('/')[-1] if len(p)<40 else p[-40:]}: {statistics.median(t)*1e3:.3f} ms ({statistics.median(t)/base:.3f})" for p, (s, fd, t) in zip(files, sess)))
