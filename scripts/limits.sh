#!/bin/sh
# The CPU and memory limits each running container of the compose project really
# got, read back from the engine (docker inspect), not from .env or the compose
# file: what is enforced, after every default and override was applied.
#
#   SERVICE  REPLICA  CPUS  MEMORY  CONTAINER      ("-" = no limit)
#
# COMPOSE (default "docker compose") selects the compose command; the project is
# whatever it resolves (COMPOSE_PROJECT_NAME, -p, or the compose file's name).
set -eu
COMPOSE=${COMPOSE:-docker compose}

ids=$($COMPOSE ps -q --status running)
if [ -z "$ids" ]; then
  echo "limits: no running container in this compose project" >&2
  exit 1
fi

# shellcheck disable=SC2086  # one argument per container id
docker inspect --format '{{index .Config.Labels "com.docker.compose.service"}} {{index .Config.Labels "com.docker.compose.container-number"}} {{.HostConfig.NanoCpus}} {{.HostConfig.CpuQuota}} {{.HostConfig.CpuPeriod}} {{.HostConfig.Memory}} {{.Name}}' $ids |
  sort -k1,1 -k2,2n |
  awk '
    function cpus(nano, quota, period) {
      if (nano > 0) return sprintf("%g", nano / 1e9)
      if (quota > 0) return sprintf("%g", quota / (period > 0 ? period : 100000))
      return "-"
    }
    function mem(b) {
      if (b <= 0) return "-"
      if (b % 1073741824 == 0) return (b / 1073741824) "G"
      if (b % 1048576 == 0) return (b / 1048576) "M"
      if (b % 1024 == 0) return (b / 1024) "K"
      return b
    }
    BEGIN { printf "%-16s %-8s %-6s %-8s %s\n", "SERVICE", "REPLICA", "CPUS", "MEMORY", "CONTAINER" }
    { sub(/^\//, "", $7); printf "%-16s %-8s %-6s %-8s %s\n", $1, $2, cpus($3, $4, $5), mem($6), $7 }
  '
