#!/bin/sh
# The engine of a cluster node (cluster/docker-compose.yml), started with the
# node's arguments. With the host's cgroup tree mounted, the engine would make
# its containers' cgroups beside the node's own, out of the node's CPU and memory
# limit; --cgroup-parent puts them under it, as a machine's size bounds what it runs.
set -eu
# The node's own cgroup (v1: the cpu controller's line of /proc/self/cgroup).
own=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3; exit}' /proc/self/cgroup)
if [ -z "$own" ] || [ "$own" = / ]; then
  echo "node-entrypoint: no cgroup v1 cpu controller path in /proc/self/cgroup: this test bed needs cgroup v1" >&2
  exit 1
fi
exec dockerd-entrypoint.sh --cgroup-parent="$own" "$@"
