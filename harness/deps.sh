#!/bin/sh
# Install (as root) or name (otherwise) the Debian packages srpart needs.
# Plain sh: it runs before Python may be installed.
set -eu
list="$(dirname "$0")/debian-packages.txt"
missing=""
for p in $(grep -v '^#' "$list"); do
	s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$s" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "srpart: installing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends $missing
else
	echo "srpart: error: missing Debian packages:$missing; as root run:" \
		"apt-get update && apt-get install -y --no-install-recommends$missing" >&2
	exit 1
fi
