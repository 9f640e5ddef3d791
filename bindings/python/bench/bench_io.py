"""One case of `sqlvault-bench bindings`: writes then reads a file of --mib MiB through
Python's buffered file objects (`Vault.open(path, "wb")` / `"rb"`), 1 MiB per call as
an application copying a stream would, and prints what it measured as JSON (the
harness's CaseOutput: phases with wall seconds, bytes and CPU seconds; peak RSS).

Every 4 KiB of the data carries a unique stamp so no chunk deduplicates, exactly as in
the Rust case it is compared with; the stamps are checked on the way back. Then it opens
a vault with the key file DIR/bench.key and writes a 4 KiB file, 20 times (phase `open`)."""

import argparse
import json
import os
import resource
import struct
import sys
import time

import sqlvault

BLOCK = 1 << 20
STAMP_EVERY = 4096
OPENS = 20


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stamp(buf, block_no):
    base = block_no * (BLOCK // STAMP_EVERY)
    for j in range(BLOCK // STAMP_EVERY):
        struct.pack_into("<Q", buf, j * STAMP_EVERY, base + j)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    path = os.path.join(a.dir, "py-bench.vault")
    buf = bytearray(os.urandom(BLOCK))
    phases = {}
    with sqlvault.Vault.create(path, "bench", kdf_memory_kib=8192, kdf_iterations=1) as v:
        excluded = 0.0
        c0, t0 = cpu(), time.perf_counter()
        with v.open("/big.bin", "wb") as f:
            for i in range(a.mib):
                s = time.perf_counter()
                stamp(buf, i)
                excluded += time.perf_counter() - s
                f.write(buf)
        phases["write"] = {"seconds": time.perf_counter() - t0 - excluded, "units": a.mib * BLOCK, "cpu_s": cpu() - c0}
        into = bytearray(BLOCK)
        c0, t0 = cpu(), time.perf_counter()
        total = 0
        with v.open("/big.bin", "rb") as f:
            i = 0
            while True:
                n = f.readinto(into)
                if n == 0:
                    break
                if struct.unpack_from("<Q", into, 0)[0] != i * (BLOCK // STAMP_EVERY):
                    sys.exit(f"block {i} read back wrong")
                total += n
                i += 1
        phases["read"] = {"seconds": time.perf_counter() - t0, "units": total, "cpu_s": cpu() - c0}
        if total != a.mib * BLOCK:
            sys.exit(f"read {total} bytes, wrote {a.mib * BLOCK}")
    os.remove(path)
    # Open with the key file DIR/bench.key, write a 4 KiB file, close: OPENS times.
    key, small = os.path.join(a.dir, "bench.key"), os.path.join(a.dir, "py-open.vault")
    sqlvault.Vault.create(small, key_file=key).close()
    data = bytes(4096)
    c0, t0 = cpu(), time.perf_counter()
    for i in range(OPENS):
        with sqlvault.Vault.open(small, key_file=key) as v:
            v.write_bytes(f"/small-{i}.bin", data)
    phases["open"] = {"seconds": time.perf_counter() - t0, "units": OPENS, "cpu_s": cpu() - c0}
    for f in (small, small + "-wal", small + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"phases": phases, "peak_rss_kib": peak, "notes": {"python": sys.version.split()[0]}}))


if __name__ == "__main__":
    main()
