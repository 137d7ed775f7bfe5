#!/usr/bin/env bash
# A pmcached cluster on one machine: N instances, each with its own store,
# behind twemproxy (Debian's nutcracker) with ketama consistent hashing.
# Clients talk memcached to the proxy; the proxy shards keys over the
# instances. docs/pmcached.md says how the same layout spans machines.
#
#   cluster.sh start DIR N [BASE_PORT] [PROXY_PORT]   instances on BASE_PORT+1..N
#   cluster.sh restart DIR I                          (re)start instance I alone
#   cluster.sh stop DIR                               SIGTERM everything (clean stops)
#
# PMCACHED and NUTCRACKER name the binaries (default: from PATH).
set -euo pipefail
PMCACHED=${PMCACHED:-pmcached}
NUTCRACKER=${NUTCRACKER:-nutcracker}

wait_port() {  # wait_port PORT: until something accepts on it (10 s)
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "cluster.sh: nothing listens on port $1" >&2
  return 1
}

alive() {  # alive PID: running, not a zombie no one reaped (kill -0 says yes to those)
  local _pid _comm state
  read -r _pid _comm state _ <"/proc/$1/stat" 2>/dev/null && [ "$state" != Z ]
}

start_instance() {  # start_instance DIR I
  local dir=$1 i=$2 port pid
  port=$(cat "$dir/base_port")
  port=$((port + i))
  # A running instance keeps its store locked: a second one would exit at
  # once while the first still answers on the port (and its pid file would
  # name the wrong process).
  if [ -e "$dir/pm$i.pid" ] && alive "$(cat "$dir/pm$i.pid")"; then
    echo "cluster.sh: instance $i runs already (pid $(cat "$dir/pm$i.pid")); stop it first" >&2
    return 1
  fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "cluster.sh: port $port is taken (another cluster?); choose another BASE_PORT" >&2
    return 1
  fi
  "$PMCACHED" "$dir/pm$i.kv" -p "$port" -l 127.0.0.1 -t 2 2>>"$dir/pm$i.log" &
  pid=$!
  wait_port "$port" || { kill "$pid" 2>/dev/null; return 1; }
  alive "$pid" || { echo "cluster.sh: instance $i exited; see $dir/pm$i.log" >&2; return 1; }
  echo "$pid" >"$dir/pm$i.pid"
}

cmd=${1:-}
case "$cmd" in
  start)
    dir=$2 n=$3 base=${4:-22200} proxy=${5:-22121}
    mkdir -p "$dir"
    echo "$base" >"$dir/base_port"
    echo "$n" >"$dir/instances"
    {
      echo "pmcached:"
      echo "  listen: 127.0.0.1:$proxy"
      echo "  hash: fnv1a_64"
      echo "  distribution: ketama"
      echo "  timeout: 2000"
      # A dead instance is not ejected: its keys wait for it rather than
      # move to another instance (it comes back with all of them).
      echo "  auto_eject_hosts: false"
      echo "  server_retry_timeout: 200"
      echo "  servers:"
      for i in $(seq "$n"); do echo "   - 127.0.0.1:$((base + i)):1 pm$i"; done
    } >"$dir/nutcracker.yml"
    "$NUTCRACKER" -t -c "$dir/nutcracker.yml" >/dev/null 2>&1 || {
      echo "cluster.sh: nutcracker refused $dir/nutcracker.yml" >&2; exit 1; }
    for i in $(seq "$n"); do start_instance "$dir" "$i"; done
    "$NUTCRACKER" -c "$dir/nutcracker.yml" -o "$dir/nutcracker.log" -s $((proxy + 1)) \
      -a 127.0.0.1 -p "$dir/nutcracker.pid" &
    echo $! >"$dir/nutcracker.pid"
    wait_port "$proxy"
    echo "cluster: $n pmcached instances on ports $((base + 1))-$((base + n)), twemproxy on $proxy"
    ;;
  restart)
    dir=$2 i=$3
    start_instance "$dir" "$i"
    ;;
  stop)
    dir=$2
    for f in "$dir"/*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
      rm -f "$f"
    done
    ;;
  *)
    sed -n '2,13p' "$0" >&2
    exit 2
    ;;
esac
