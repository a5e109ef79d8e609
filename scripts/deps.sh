#!/usr/bin/env bash
# Install the Debian packages ntbx builds and tests with, if missing.
# Each layer lists its own in scripts/deps.d/LAYER.txt (one per line, #
# comments).  Only apt-get; nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")"
need=()
for pkg in $(sed 's/#.*//' deps.d/*.txt | tr -s ' \n' '\n' | sort -u); do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" \
    || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "ntbx: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "ntbx: installing ${need[*]}" >&2
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
