#!/usr/bin/env bash
# Install the Debian packages ntbx builds and tests with, if missing.
# Only apt-get; nothing else is downloaded.
set -euo pipefail
need=()
for pkg in build-essential cmake ninja-build pkg-config python3 iproute2; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" \
    || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "ntbx: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
