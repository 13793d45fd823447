#!/usr/bin/env bash
# Start a Docker engine for the docker sandbox backend and its tests (no systemd needed).
#
#   bash scripts/docker_engine.sh        # installs docker.io if missing, starts dockerd
#
# Idempotent: an engine that already answers is left as it is. The engine runs without
# iptables and without a bridge (sandboxes have no network; image builds use the host's).
set -euo pipefail

LOG=${LOG:-/var/log/dockerd-agentic-rl.log}

engine_up() { timeout 20 docker info >/dev/null 2>&1; }
say() { echo "docker-engine: $*"; }

if engine_up; then
  say "an engine already answers; leaving it as it is"
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  say "installing docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
say "starting dockerd (log: $LOG)"
nohup dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=overlay2 >"$LOG" 2>&1 &
for _ in $(seq 60); do engine_up && break; sleep 1; done
if ! engine_up; then
  say "the engine did not start; last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2 || true
  exit 1
fi
say "up"
