#!/bin/bash
# Inside the rdma-vm guest: rxe0 is active with a RoCEv2 IPv4-mapped GID at index 1, and a
# real RC ping-pong passes over it.
set -u
ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE || { echo "rxe0 is not PORT_ACTIVE"; exit 1; }
gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)
echo "rxe0 GID[1] = $gid"
case "$gid" in 0000:0000:0000:0000:0000:ffff:*) ;; *) echo "GID 1 is not IPv4-mapped"; exit 1 ;; esac
timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 100 > server.log 2>&1 &
sleep 1
timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 100 127.0.0.1 || { cat server.log; exit 1; }
wait $! || { cat server.log; exit 1; }
echo "smoke: rc_pingpong over rxe0 passed"
