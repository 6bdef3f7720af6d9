# Sourced by the bench scripts. Every load client connects from 127.0.0.1, so the edge's
# per-address caps are raised above the load; builds from before the caps have no such options
# (and no such cap to raise).
serve_caps() {  # kassa binary; prints the options, one a line
  # The help is read whole before it is searched: `grep -q` stops reading at its first match, and
  # under `set -o pipefail` the help's writer, killed by SIGPIPE, failed this test now and then, so
  # a run went without its caps and stalled at the default 4 096 connections from 127.0.0.1.
  local help; help=$("$1" serve --help 2>&1 || true)
  if [[ $help == *--max-half-open-per-address* ]]; then
    printf '%s\n' --max-half-open-per-address 4096 --max-half-open 4096 --max-connections-per-address 100000
  fi
}
