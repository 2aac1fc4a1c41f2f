"""The functions release the GIL while they work: Python threads run meanwhile, and two
optimizations can run at once with correct results."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import onnx

import onnx_opt
from helpers import assert_outputs_close, deep_mlp, node_count, ort_run, random_feeds, text_model

#: The size of the check's random inputs to deep_mlp that makes one optimization last a while
#: (about a second on a 2-core machine; 2048 rows took 0.2 s once the check ran both models
#: side by side), so that a held GIL would show as one long gap in the ticks.
SLOW = {"N": 8192}


class Ticker:
    """A Python thread that records a timestamp every millisecond or so; while another thread
    holds the GIL it cannot run, and its ticks stop."""

    def __init__(self):
        self.ticks = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.ticks.append(time.perf_counter())
            time.sleep(0.001)

    def __enter__(self):
        self._thread.start()
        while not self.ticks:
            time.sleep(0.001)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def longest_gap(self, t0, t1):
        inside = [t for t in self.ticks if t0 <= t <= t1]
        points = [t0, *inside, t1]
        return max(b - a for a, b in zip(points, points[1:])), len(inside)


def test_a_python_thread_runs_during_optimize():
    model = deep_mlp()
    data = model.SerializeToString()
    with Ticker() as ticker:
        t0 = time.perf_counter()
        out = onnx_opt.optimize(data, dims=SLOW)
        t1 = time.perf_counter()
    elapsed = t1 - t0
    assert elapsed > 0.2, f"optimize took {elapsed:.3f} s: too short to tell whether the GIL was held"
    gap, ticks = ticker.longest_gap(t0, t1)
    assert gap < elapsed / 2, f"no Python tick for {gap:.3f} s of a {elapsed:.3f} s optimize: the GIL was held"
    assert ticks > 10
    out = onnx.ModelProto.FromString(out)
    assert node_count(out) < node_count(model)
    feeds = random_feeds(model, 0, dims={"N": 8})
    assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_two_optimizations_in_threads_with_a_counting_thread():
    models = [deep_mlp(seed=1), deep_mlp(seed=2, layers=3)]
    with Ticker() as ticker, ThreadPoolExecutor(max_workers=2) as pool:
        t0 = time.perf_counter()
        futures = [pool.submit(onnx_opt.optimize, m, dims=SLOW) for m in models]
        results = [f.result() for f in futures]
        t1 = time.perf_counter()
    gap, _ = ticker.longest_gap(t0, t1)
    assert gap < (t1 - t0) / 2, f"no Python tick for {gap:.3f} s of {t1 - t0:.3f} s"
    for model, out in zip(models, results):
        assert isinstance(out, onnx.ModelProto)
        assert node_count(out) < node_count(model)
        for seed in (0, 1):
            feeds = random_feeds(model, seed, dims={"N": 8})
            assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_many_calls_from_a_pool_agree():
    model = text_model("mlp")
    data = model.SerializeToString()
    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(lambda _: onnx_opt.optimize(data), range(8)))
    first = outs[0]
    assert all(o == first for o in outs), "concurrent calls returned different models"
    feeds = random_feeds(model, 1)
    assert_outputs_close(ort_run(first, feeds), ort_run(model, feeds))
