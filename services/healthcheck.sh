#!/bin/bash
# Docker's health probe of the lab's own services: healthy when
# GET http://127.0.0.1:<port><path> answers 200 within 3 s.
#     bash services/healthcheck.sh <port> [path]
# bash's /dev/tcp, not a Python one-liner: starting an interpreter for every
# probe takes CPU from the container's own limit. The bare workers of
# `make bench` are probed as often, from bash too (docs/hot-path.md).
exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "${2:-/}" >&3
read -r -t 3 status <&3 && [[ $status == *" 200 "* ]]
