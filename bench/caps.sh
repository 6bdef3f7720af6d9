# Sourced by the bench scripts. Every load client connects from 127.0.0.1, so the edge's
# per-address caps are raised above the load; builds from before the caps have no such options
# (and no such cap to raise).
serve_caps() {  # kassa binary; prints the options, one a line
  if "$1" serve --help 2>&1 | grep -q -- --max-half-open-per-address; then
    printf '%s\n' --max-half-open-per-address 4096 --max-half-open 4096 --max-connections-per-address 100000
  fi
}
