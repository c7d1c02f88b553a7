#!/usr/bin/env bash
# Installs what primary/tests/it/dashboard_browser.rs needs: Debian's chromium
# (apt-get, when missing and root) and playwright-core (npm ci, pinned by
# package-lock.json, into tests/browser/node_modules). Whatever cannot be
# installed is reported; the test then prints `SKIP: <reason>`.
set -uo pipefail
cd "$(dirname "$0")"

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing chromium (apt-get)"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
            || echo "chromium could not be installed: the browser test will SKIP"
    else
        echo "chromium is missing and cannot be installed here (not root, or no apt-get): the browser test will SKIP"
    fi
fi
command -v chromium >/dev/null 2>&1 && chromium --version 2>/dev/null

if command -v npm >/dev/null 2>&1; then
    if [ ! -d node_modules/playwright-core ]; then
        echo "installing playwright-core (npm ci)"
        npm ci --no-audit --no-fund --silent || echo "playwright-core could not be installed: the browser test will SKIP"
    fi
    [ -d node_modules/playwright-core ] && echo "playwright-core $(node -p 'require("./node_modules/playwright-core/package.json").version')"
else
    echo "npm is missing: the browser test will SKIP"
fi
exit 0
