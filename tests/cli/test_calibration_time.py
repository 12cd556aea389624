#!/usr/bin/env python3
"""The whole CPU calibration (`pipesim calibrate --cpu-only`, not --quick) finishes in under a minute on a
small machine, with every STREAM array at least 4x the machine's last-level cache. Run against a Release build
(./test.sh does): a sanitized build measures the sanitizer.

Usage: test_calibration_time.py PIPESIM
"""
import os
import subprocess
import sys
import tempfile
import time

from sysfs_cache import last_level_cache_bytes

LIMIT_S = 60


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        out = subprocess.run([sys.argv[1], "calibrate", "--cpu-only", "--out", os.path.join(tmp, "full.json")],
                             capture_output=True, text=True, timeout=600)
        took = time.monotonic() - start
    if out.returncode != 0:
        raise SystemExit(f"calibrate failed: {out.stderr}")
    stream = int(out.stderr.split("STREAM arrays of ")[1].split(" MiB")[0]) << 20
    cache = last_level_cache_bytes()
    print(f"calibrate --cpu-only: {took:.1f} s on {os.cpu_count()} CPUs; STREAM arrays {stream >> 20} MiB, "
          f"last-level cache {cache >> 20} MiB")
    if stream < 4 * cache:
        raise SystemExit(f"STREAM arrays of {stream} bytes are under 4x the last-level cache ({cache} bytes)")
    if took > LIMIT_S:
        raise SystemExit(f"calibrate --cpu-only took {took:.1f} s, over {LIMIT_S} s")


if __name__ == "__main__":
    main()
