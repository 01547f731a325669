#!/usr/bin/env bash
# PostgreSQL 15's server binaries for tests/rewardkit/optimize/test_optimize_postgres.py, which starts its
# own server in a temporary folder on 127.0.0.1. Installs them with apt-get when initdb is absent.
set -euo pipefail
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-postgres.sh: initdb not found and not root; run: sudo apt-get install -y postgresql" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb
