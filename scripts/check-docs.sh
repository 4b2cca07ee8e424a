#!/usr/bin/env bash
# Keeps the docs from rotting: runs every runnable command in docs/*.md and checks
# every relative link in docs/*.md and README.md.
#
#   scripts/check-docs.sh            # use the built binaries
#   scripts/check-docs.sh --build    # cargo build them first (what .ci/run does)
#
# Runnable = a fenced block tagged ```console. In it, a line starting with `$ ` is a command
# (a trailing `\` continues it on the next line); the lines after it, up to the next `$ `, are
# its expected output: each must match a line of the real output (stdout and stderr), in
# order, where `...` in an expected line matches any text and a run of spaces any run of
# whitespace. Every command must exit 0.
# Other fences are shown, not run; but in ```sh blocks every command (a trailing `\` joins the
# next line) that calls `ganglion`,
# `ganglion-devnet` or `ganglion-indexer` is checked against the binary: its subcommand must
# exist (`<bin> <subcommand...> --help` exits 0) and each `--flag` it uses must be in that help.
# A note `<!-- coming: ganglion node run -->` says a command does not exist yet: the check
# fails once it does, so the docs are updated with it.
#
# Each doc runs in one bash session (so `export` and `cd` carry over from line to line; what
# it starts in the background is stopped with it), starting in the repository root, with:
#   - `ganglion`, `ganglion-devnet`, `ganglion-indexer` first on PATH, from
#     $CARGO_TARGET_DIR/debug (or target/debug; GANGLION_DOCS_BIN overrides the folder);
#   - HOME = a fresh throwaway folder (so `~/.ganglion/...`, the default data dir, is too);
#   - ~/devnet = the data dir of a devnet this script starts (`ganglion-devnet up --data-dir
#     ~/devnet`, as the guides tell the reader to run in another terminal): its N2C socket is
#     ~/devnet/node.socket;
#   - no GANGLION_* variable from the caller's environment;
#   - a Docker Engine (started with scripts/ensure-docker.sh if none answers), for `doctor`.
# A failure names the doc and the line, shows the command's output and makes the script exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

build=0
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;
    *) echo "usage: scripts/check-docs.sh [--build]" >&2; exit 2 ;;
  esac
done

target="${CARGO_TARGET_DIR:-$root/target}"
bin="${GANGLION_DOCS_BIN:-$target/debug}"
if [ "$build" = 1 ]; then
  command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
  echo "==> building ganglion, ganglion-devnet, ganglion-indexer" >&2
  cargo build --locked -p ganglion-node --bin ganglion -p ganglion-testnet --bin ganglion-devnet \
    -p ganglion-indexer --bin ganglion-indexer
fi
for b in ganglion ganglion-devnet ganglion-indexer; do
  [ -x "$bin/$b" ] || { echo "error: $bin/$b is missing: build it (scripts/check-docs.sh --build)" >&2; exit 1; }
done
command -v python3 >/dev/null 2>&1 || { echo "error: check-docs needs python3" >&2; exit 1; }

# The guides run `ganglion doctor`, which fails without a Docker Engine: start one if none
# answers (idempotent; installs docker.io on Debian; needs root).
if ! docker info >/dev/null 2>&1; then
  echo "==> no Docker Engine answers: scripts/ensure-docker.sh" >&2
  bash scripts/ensure-docker.sh
fi

work=$(mktemp -d /tmp/ganglion-check-docs.XXXXXX)
devnet_pid=
cleanup() {
  if [ -n "$devnet_pid" ]; then kill "$devnet_pid" 2>/dev/null || true; wait "$devnet_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The devnet every doc shares (on free ports, so a running devnet or node is not disturbed).
read -r n2n n2c_tcp http < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join("127.0.0.1:%d" % s.getsockname()[1] for s in ss))')
echo "==> starting a devnet in $work/devnet (n2n $n2n, n2c $n2c_tcp, http $http)" >&2
"$bin/ganglion-devnet" up --data-dir "$work/devnet" --n2n "$n2n" --n2c-tcp "$n2c_tcp" \
  --http "$http" >"$work/devnet.out" 2>"$work/devnet.err" &
devnet_pid=$!
for _ in $(seq 1 300); do
  [ -s "$work/devnet.out" ] && break
  kill -0 "$devnet_pid" 2>/dev/null || { cat "$work/devnet.err" >&2; echo "error: the devnet did not start" >&2; exit 1; }
  sleep 0.1
done
[ -s "$work/devnet.out" ] || { cat "$work/devnet.err" >&2; echo "error: the devnet printed no addresses in 30 s" >&2; exit 1; }

export CHECK_DOCS_ROOT="$root" CHECK_DOCS_BIN="$bin" CHECK_DOCS_WORK="$work"
python3 - <<'PY'
import glob, os, re, signal, subprocess, sys, time

root = os.environ["CHECK_DOCS_ROOT"]
bin_dir = os.environ["CHECK_DOCS_BIN"]
work = os.environ["CHECK_DOCS_WORK"]
failures = []

def rel(path):
    return os.path.relpath(path, root)

# ---------------------------------------------------------------- links
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")

def prose_lines(text):
    """(line number, line) outside fenced code, inline code removed."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line)

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read()):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                out.add(slug(m.group(1)))
    return out

docs = sorted(glob.glob(os.path.join(root, "docs", "*.md")))
link_files = docs + [os.path.join(root, "README.md")]
links_checked = 0
for path in link_files:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
                continue
            links_checked += 1
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                failures.append(f"{rel(path)}:{n}: broken link {target!r}: {rel(dest)} does not exist")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                failures.append(f"{rel(path)}:{n}: broken link {target!r}: no heading #{anchor} in {rel(dest)}")
print(f"==> links: {links_checked} relative links in {len(link_files)} files checked", file=sys.stderr)

# ---------------------------------------------------------------- runnable commands
def console_blocks(text):
    """Yields lists of (line number, line) of each ```console block."""
    block = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*```\s*(\S*)", line)
        if m and block is None:
            if m.group(1) == "console":
                block = []
            else:
                block = False      # another fenced block: skip it
            continue
        if m and block is not None:
            if block:
                yield block
            block = None
            continue
        if isinstance(block, list):
            block.append((n, line))

def commands(block):
    """[(line number, command, [expected lines])]."""
    cmds = []
    cont = False
    for n, line in block:
        if cont:
            cmds[-1][1] += "\n" + line
            cont = line.rstrip().endswith("\\")
        elif line.startswith("$ "):
            cmds.append([n, line[2:], []])
            cont = line.rstrip().endswith("\\")
        elif cmds and line.strip():
            cmds[-1][2].append(line.strip())
    return cmds

def pattern(expected):
    # runs of spaces match any run of whitespace (column alignment may vary)
    parts = [re.sub(r"(?:\\ )+", r"\\s+", re.escape(p)) for p in expected.split("...")]
    return re.compile(r"^\s*" + ".*".join(parts) + r"\s*$")

commands_run = 0
for path in docs:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    cmds = [c for b in console_blocks(text) for c in commands(b)]
    if not cmds:
        continue
    name = os.path.splitext(os.path.basename(path))[0]
    home = os.path.join(work, "home-" + name)
    out = os.path.join(work, "out-" + name)
    os.makedirs(home)
    os.makedirs(out)
    os.symlink(os.path.join(work, "devnet"), os.path.join(home, "devnet"))
    script = ["set +e", f"cd {root!r}"]
    for i, (n, cmd, _) in enumerate(cmds):
        script.append(f"{{\n{cmd}\n}} >{out}/{i}.out 2>&1 </dev/null; echo $? >{out}/{i}.rc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGLION_") and not k.startswith("CHECK_DOCS_")}
    env["HOME"] = home
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["NO_COLOR"] = "1"
    env["RUST_BACKTRACE"] = "0"
    print(f"==> {rel(path)}: {len(cmds)} commands", file=sys.stderr)
    # Its own process group: what a doc starts in the background (`ganglion node run … &`)
    # is stopped with it, even when the doc's own clean-up line did not run.
    session = subprocess.Popen(["bash", "-c", "\n".join(script)], env=env, start_new_session=True)
    try:
        session.wait(timeout=600)
    except subprocess.TimeoutExpired:
        failures.append(f"{rel(path)}: did not finish within 600 s")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(session.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(3)
    if session.poll() is None:
        session.wait()
    for i, (n, cmd, expected) in enumerate(cmds):
        commands_run += 1
        shown = cmd.replace("\n", " ")
        try:
            with open(f"{out}/{i}.rc") as f:
                rc = int(f.read().strip())
            with open(f"{out}/{i}.out", encoding="utf-8", errors="replace") as f:
                output = f.read()
        except FileNotFoundError:
            failures.append(f"{rel(path)}:{n}: `{shown}` never finished")
            break
        lines = output.splitlines()
        problem = None
        if rc != 0:
            problem = f"exited {rc}"
        else:
            at = 0
            for e in expected:
                p = pattern(e)
                while at < len(lines) and not p.match(lines[at]):
                    at += 1
                if at == len(lines):
                    problem = f"expected output line not found (in order): {e!r}"
                    break
                at += 1
        if problem:
            indented = "".join("      | " + l + "\n" for l in lines[-40:])
            failures.append(f"{rel(path)}:{n}: `{shown}` {problem}\n    output:\n{indented}")
        else:
            print(f"    ok  {rel(path)}:{n}: {shown}", file=sys.stderr)

print(f"==> commands: {commands_run} run", file=sys.stderr)

# ---------------------------------------------------------------- shown (```sh) commands
import shlex
BINS = ("ganglion", "ganglion-devnet", "ganglion-indexer")

def sh_lines(text):
    """Each shell command of a sh/bash/shell fence with its first line's number; a line
    ending in `\\` continues on the next, as in a shell."""
    fence = None
    pending, start = "", 0
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*```\s*(\S*)", line)
        if m:
            fence = None if fence is not None else m.group(1)
            pending = ""
            continue
        if fence in ("sh", "bash", "shell"):
            if not pending:
                start = n
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield start, pending + line
            pending = ""

shown_checked = 0
for path in docs:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in sh_lines(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            failures.append(f"{rel(path)}:{n}: cannot parse shell line: {e}")
            continue
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words.pop(0)
        if not words or words[0] not in BINS:
            continue
        sub = []
        for w in words[1:]:
            if not re.match(r"^[a-z][a-z0-9-]*$", w):
                break
            sub.append(w)
        flags = sorted({w.split("=", 1)[0] for w in words[1:] if w.startswith("--")})
        res = subprocess.run([os.path.join(bin_dir, words[0])] + sub + ["--help"],
                             capture_output=True, text=True, timeout=60)
        shown = " ".join([words[0]] + sub)
        shown_checked += 1
        if res.returncode != 0:
            failures.append(f"{rel(path)}:{n}: `{shown}` is not a command of {words[0]}:\n      {res.stderr.strip()[:300]}")
            continue
        for fl in flags:
            if not re.search(re.escape(fl) + r"\b", res.stdout):
                failures.append(f"{rel(path)}:{n}: `{shown}` has no flag {fl} (see `{shown} --help`)")
print(f"==> shown commands: {shown_checked} checked against --help", file=sys.stderr)

# ---------------------------------------------------------------- "coming" notes
# `<!-- coming: ganglion node run -->` marks a note saying a command does not exist yet; the
# check fails as soon as it does exist, so the note is rewritten instead of going stale.
coming_checked = 0
for path in docs:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"<!--\s*coming:\s*(.*?)\s*-->", line):
            words = m.group(1).split()
            if not words or words[0] not in BINS:
                failures.append(f"{rel(path)}:{n}: a coming note must name a command of {', '.join(BINS)}")
                continue
            coming_checked += 1
            res = subprocess.run([os.path.join(bin_dir, words[0])] + words[1:] + ["--help"],
                                 capture_output=True, text=True, timeout=60)
            if res.returncode == 0:
                failures.append(f"{rel(path)}:{n}: `{m.group(1)}` exists now: document it and drop its 'coming' note")
print(f"==> coming notes: {coming_checked} commands confirmed absent", file=sys.stderr)
if commands_run == 0:
    failures.append("no ```console command found in docs/*.md: nothing was checked")
if failures:
    print("\ncheck-docs FAILED:", file=sys.stderr)
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1)
print("check-docs: all links resolve and every documented command ran as shown", file=sys.stderr)
PY
