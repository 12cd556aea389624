"""The machine's last-level cache from sysfs, for the tests that check array sizes against it."""
import os


def last_level_cache_bytes():
    """The machine's last-level cache as sysfs reports it: each instance of the highest level counted once."""
    root = "/sys/devices/system/cpu"
    caches = {}
    for cpu in os.listdir(root):
        if not (cpu.startswith("cpu") and cpu[3:].isdigit()):
            continue
        folder = os.path.join(root, cpu, "cache")
        indexes = [i for i in os.listdir(folder) if i.startswith("index")] if os.path.isdir(folder) else []
        for index in indexes:
            def read(name):
                with open(os.path.join(folder, index, name)) as f:
                    return f.read().strip()
            if read("type") == "Instruction":
                continue
            size = read("size")
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
            caches[(int(read("level")), read("shared_cpu_list"))] = int(size.rstrip("KMG")) * scale
    if not caches:
        return 0
    top = max(level for level, _ in caches)
    return sum(size for (level, _), size in caches.items() if level == top)
