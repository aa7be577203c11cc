#!/usr/bin/env bash
# The browser tests drive Debian's chromium through Playwright; install it if it is missing.
# Playwright's own browser download is never used.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: install Debian's package with 'sudo apt-get install -y chromium'" >&2
  exit 1
fi
echo "installing Debian's chromium for the browser tests"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
