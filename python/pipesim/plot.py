"""Figures of simulated runs (matplotlib); each function returns the figure it drew.

    import pipesim, pipesim.plot
    tl = pipesim.timeline(model="llama3-8b", hw="rtx4090-8x", pp=4, schedule="1f1b", global_batch=8)
    pipesim.plot.gantt(tl).savefig("1f1b.png")
"""

import numpy as np

# One colour per op kind; kinds not listed get grey.
KIND_COLOURS = {
    "forward": "#4C72B0", "backward": "#DD8452", "backward_input": "#DD8452", "backward_weight": "#C44E52",
    "recompute": "#8172B3", "optimizer": "#FFBF00", "p2p": "#937860", "allreduce": "#DA8BC3",
    "allgather": "#8C8C8C", "reducescatter": "#CCB974", "alltoall": "#64B5CD", "h2d": "#17BECF",
    "d2h": "#BCBD22", "nvme_read": "#9EDAE5", "nvme_write": "#DBDB8D", "fill": "#2CA02C",
    "context_switch": "#98DF8A", "bubble": "#FFFFFF", "sync": "#FFFFFF",
}


def _figure(ax, size):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size)
    return fig, ax


def gantt(timeline, ax=None, title=None, max_rows=64):
    """One row per stream that ran something (GPU streams first, then host and NVMe), bars coloured by op
    kind; the gaps between bars are the bubbles. ``timeline`` is a ``pipesim.Timeline`` with its plan
    (``pipesim.timeline`` or ``load_timeline(path, plan)``)."""
    if "device" not in timeline:
        raise ValueError("gantt() needs the plan's devices: use pipesim.timeline() or load_timeline(path, plan)")
    streams = sorted(set(timeline["stream"].tolist()),
                     key=lambda s: (_device_rank(timeline, s), s))[:max_rows]
    row = {s: i for i, s in enumerate(streams)}
    fig, ax = _figure(ax, (12, 0.35 * len(streams) + 1.5))
    kinds_drawn = {}
    for kind in sorted(set(timeline["kind"].tolist())):
        mask = (timeline["kind"] == kind) & np.isin(timeline["stream"], streams)
        if not mask.any():
            continue
        starts, ends = timeline["start_s"][mask], timeline["end_s"][mask]
        rows = np.array([row[s] for s in timeline["stream"][mask]])
        colour = KIND_COLOURS.get(kind, "#999999")
        ax.barh(rows, ends - starts, left=starts, height=0.8, color=colour, edgecolor="white", linewidth=0.3)
        kinds_drawn[kind] = colour
    labels = []
    for s in streams:
        first = int(np.argmax(timeline["stream"] == s))
        labels.append(f"{timeline['device_name'][first]} {timeline['stream_kind'][first]}")
    ax.set_yticks(range(len(streams)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    import matplotlib.patches as mpatches

    ax.legend(handles=[mpatches.Patch(color=c, label=k) for k, c in kinds_drawn.items()], fontsize=7,
              loc="upper right", ncol=min(4, len(kinds_drawn)))
    ax.set_title(title or _title(timeline))
    fig.tight_layout()
    return fig


def _device_rank(timeline, stream):
    first = int(np.argmax(timeline["stream"] == stream))
    name = str(timeline["device_name"][first])
    kind = next((k for k in ("gpu", "host", "nvme") if name.startswith(k)), "")
    return (("gpu", "host", "nvme").index(kind) if kind else 3, int(timeline["device"][first]))


def _title(timeline):
    m = timeline.metrics
    if not m:
        return "timeline"
    return f"{m.get('schedule')} · {m.get('model')} on {m.get('hardware')} · step {m.get('step_time_s', 0):.3f} s"


def memory(timeline, ax=None, title=None):
    """Memory in use on each GPU over the run: its resident bytes, plus what each op allocates when it
    starts, minus what it frees when it ends (the engine's accounting)."""
    if "alloc_bytes" not in timeline:
        raise ValueError("memory() needs the plan: use pipesim.timeline() or load_timeline(path, plan)")
    fig, ax = _figure(ax, (10, 4))
    for d in np.flatnonzero(timeline.devices["kind"] == "gpu"):
        times, used = memory_curve(timeline, d)
        ax.step(times, used / 2**30, where="post", label=str(timeline.devices["name"][d]), linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("GPU memory (GiB)")
    ax.legend(fontsize=7, ncol=4)
    ax.set_title(title or "GPU memory over the run")
    fig.tight_layout()
    return fig


def memory_curve(timeline, device):
    """(times in s, bytes in use) of one device, a step function: its resident bytes, plus each op's
    allocation when it starts, minus its frees when it ends; at one instant frees come first, as in the
    engine, so the curve's maximum is the run's reported peak."""
    on = timeline["device"] == device
    times = np.concatenate([timeline["start_s"][on], timeline["end_s"][on]])
    deltas = np.concatenate([timeline["alloc_bytes"][on], -timeline["free_bytes"][on]])
    order = np.lexsort((deltas, times))
    resident = int(timeline.devices["resident_bytes"][device])
    return (np.concatenate([[0.0], times[order]]),
            np.concatenate([[resident], resident + np.cumsum(deltas[order])]).astype(np.float64))


def bubble_bars(results, ax=None, title=None):
    """Stacked bars of each result's bubble fraction split into its parts (warm-up, intra, drain, ...); the
    results are ``simulate`` dicts (e.g. ``simulate(schedule="all", ...)``)."""
    if isinstance(results, dict):
        results = [results]
    fig, ax = _figure(ax, (max(6, 0.9 * len(results) + 2), 4))
    parts = []
    for r in results:
        for k in r.get("bubble_breakdown", {}):
            if k not in parts:
                parts.append(k)
    labels = [r["schedule"] + ("" if r.get("data_parallel", "ddp") == "ddp" else " " + r["data_parallel"])
              for r in results]
    bottom = np.zeros(len(results))
    for part in parts:
        values = np.array([100 * r.get("bubble_breakdown", {}).get(part, 0.0) for r in results])
        ax.bar(labels, values, bottom=bottom, label=part)
        bottom += values
    ax.set_ylabel("bubble (% of GPU time)")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=8)
    ax.set_title(title or "pipeline bubbles")
    fig.tight_layout()
    return fig
