#!/usr/bin/env python3
"""`simulate --chakra-out`: the plan as Chakra execution traces, read back field by field against Chakra's
protobuf schema (mlcommons/chakra schema/protobuf/et_def.proto: GlobalMetadata.version = 1; Node.id = 1,
name = 2, type = 3, ctrl_deps = 4, data_deps = 5, start_time_micros = 6, duration_micros = 7, attr = 10;
AttributeProto.name = 1, int64_val = 9, bool_val = 27, string_val = 29), each message length-delimited. Every
op of the plan must come back once, on its GPU's file, as a node of its kind, with its stream's previous op as
control dependency, its own dependencies as data dependencies (a pipeline send from another GPU as the receive
on this one), and its simulated time; a collective's type, buffer and group; a send and its receive the same
size and tag.

Usage: test_chakra.py PIPESIM
"""
import json
import os
import subprocess
import sys
import tempfile

NODE_TYPES = {"comp": 4, "send": 5, "recv": 6, "coll": 7}
COLL_TYPES = {"allreduce": 0, "allgather": 2, "alltoall": 6, "reducescatter": 7}


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field number, value) of a message: varints as ints, length-delimited as bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((field, v))
    return out


def packed(b):
    vals, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        vals.append(v)
    return vals


def read_trace(path):
    buf, i, messages = open(path, "rb").read(), 0, []
    while i < len(buf):
        n, i = varint(buf, i)
        messages.append(fields(buf[i:i + n]))
        i += n
    meta, nodes = messages[0], []
    assert dict(meta)[1] == b"0.0.4", meta
    for m in messages[1:]:
        node = {"ctrl": [], "data": [], "attr": {}, "start": 0, "dur": 0}
        for f, v in m:
            if f == 1: node["id"] = v
            elif f == 2: node["name"] = v.decode()
            elif f == 3: node["type"] = v
            elif f == 4: node["ctrl"] = packed(v)
            elif f == 5: node["data"] = packed(v)
            elif f == 6: node["start"] = v
            elif f == 7: node["dur"] = v
            elif f == 10:
                a = dict(fields(v))
                name = a.pop(1).decode()
                (field, value), = a.items()
                node["attr"][name] = value.decode() if field == 29 else value
        nodes.append(node)
    return nodes


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    pipesim = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        plan_file, tl_file, out = (os.path.join(tmp, n) for n in ("p.json", "t.json", "et"))
        subprocess.run([pipesim, "simulate", "--model", "llama2-7b", "--hw", "h100-sxm-8x", "--pp", "2", "--tp", "2",
                        "--dp", "2", "--microbatches", "4", "--seq", "1024", "--schedule", "1f1b", "--zero", "1",
                        "--chakra-out", out, "--plan-out", plan_file, "--timeline", tl_file],
                       check=True, capture_output=True)
        plan, timeline = json.load(open(plan_file)), json.load(open(tl_file))
        gpus = [d for d, dev in enumerate(plan["devices"]) if dev["kind"] == "gpu"]
        rank = {d: r for r, d in enumerate(gpus)}
        files = sorted(os.listdir(out))
        label = "1f1b.zero-1"  # the schedule's label names the files
        assert files == sorted(f"{label}.{r}.et" for r in range(len(gpus))), files
        traces = {r: {n["id"]: n for n in read_trace(os.path.join(out, f"{label}.{r}.et"))} for r in range(len(gpus))}
    ops, streams, times = plan["ops"], plan["streams"], {o["op"]: o for o in timeline["ops"]}
    n_ops = len(ops)
    owner = [rank[streams[op["stream"]]["device"]] for op in ops]
    seen, last_on_stream, checked = set(), {}, 0
    for i, op in enumerate(ops):
        node = traces[owner[i]].get(i)
        assert node is not None, f"op {i} missing from rank {owner[i]}"
        t = op.get("transfer")
        kind = ("send" if op["kind"] == "p2p" else "coll") if t else "comp"
        assert node["type"] == NODE_TYPES[kind], (i, op["kind"], node["type"])
        start, end = times[i]["start_ns"], times[i]["end_ns"]
        assert node["start"] == (start + 500) // 1000 and node["dur"] == (end - start + 500) // 1000, (i, node)
        prev = last_on_stream.get(op["stream"])
        assert node["ctrl"] == ([prev] if prev is not None else []), (i, node["ctrl"], prev)
        last_on_stream[op["stream"]] = i
        expected = [d if owner[d] == owner[i] else d + n_ops for d in op.get("deps", [])]
        assert node["data"] == expected, (i, node["data"], expected)
        if kind == "coll":
            assert node["attr"]["comm_type"] == COLL_TYPES[op["kind"]], (i, op["kind"], node["attr"])
            n, factor = t["group_size"], 2 if op["kind"] == "allreduce" else 1
            assert node["attr"]["comm_size"] == t["bytes"] * n // (factor * (n - 1)), (i, node["attr"], t)
            assert str(owner[i]) in node["attr"]["pg_name"].split(","), node["attr"]
        if kind == "send":
            recv = traces[rank[t["dst"]]][i + n_ops]
            assert recv["type"] == NODE_TYPES["recv"] and recv["attr"]["comm_src"] == owner[i]
            assert recv["attr"]["comm_size"] == node["attr"]["comm_size"] == t["bytes"]
            assert recv["attr"]["comm_tag"] == node["attr"]["comm_tag"] == i
            assert node["attr"]["comm_dst"] == rank[t["dst"]]
            seen.add((rank[t["dst"]], i + n_ops))
        seen.add((owner[i], i))
        checked += 1
    total = sum(len(t) for t in traces.values())
    assert total == len(seen), f"{total} nodes written, {len(seen)} expected"
    print(f"{len(gpus)} Chakra traces, {total} nodes: every op of the plan read back with its kind, time and "
          f"dependencies ({checked} ops)")


if __name__ == "__main__":
    main()
