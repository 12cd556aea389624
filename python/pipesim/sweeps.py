"""What-if sweeps: many ``simulate`` points, in local processes or on a Dask cluster.

    import pipesim
    grid = {"model": ["llama3-8b", "qwen3-8b"], "hw": ["rtx4090-8x", "l40s-8x"], "pp": [4, 8],
            "schedule": ["1f1b"], "global_batch": [32]}
    df = pipesim.sweep(grid)                          # local processes
    df = pipesim.sweep(grid, client=dask_client)      # a dask.distributed.Client

Each row is one point: its keyword arguments, then the result's scalar fields (step_time_s, tokens_per_s,
mfu, peak_gpu_mem_bytes, oom, ...), then ``error`` (empty when the point ran; the command line's one-line
message when it did not). Nothing is dropped, and rows keep the grid's order, so a sweep gives the same
table wherever it runs.
"""

import concurrent.futures
import itertools
import os

from . import simulate

# Per-run fields that are not results of the point (wall-clock time of the simulation itself).
_VOLATILE = {"sim_wall_s"}


def points(grid):
    """The points of a grid: a dict of lists (their Cartesian product, in order) or a list of dicts."""
    if isinstance(grid, dict):
        keys = list(grid)
        values = [v if isinstance(v, (list, tuple)) else [v] for v in grid.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    return [dict(p) for p in grid]


def evaluate(point):
    """One point: the scalar fields of ``simulate(**point)``, or its error message."""
    try:
        result = simulate(**point)
    except (ValueError, TypeError) as e:
        return {"error": str(e)}
    if isinstance(result, list):
        return {"error": "a sweep point must name one schedule, not 'all'"}
    row = {k: v for k, v in result.items()
           if k not in _VOLATILE and isinstance(v, (int, float, str, bool)) and k not in point}
    row["error"] = ""
    return row


def sweep(grid, client=None, processes=None):
    """Evaluates every point of `grid` and returns a pandas DataFrame, one row per point in grid order.
    With `client` (a ``dask.distributed.Client``) the points run on its workers, which must import
    ``pipesim`` (the same PYTHONPATH); otherwise in up to `processes` local processes (default: the CPUs)."""
    import pandas as pd

    pts = points(grid)
    if client is not None:
        futures = client.map(evaluate, pts, pure=False)
        rows = client.gather(futures)
    elif len(pts) <= 1 or processes == 1:
        rows = [evaluate(p) for p in pts]
    else:
        workers = processes or os.cpu_count() or 1
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(evaluate, pts))
    return pd.DataFrame([{**p, **r} for p, r in zip(pts, rows)])
