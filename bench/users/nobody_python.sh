#!/usr/bin/env bash
# Prints a python that uid nobody can run with this checkout's .venv packages (torch, wp_autotrace, psutil):
# the .venv's own interpreter may sit under a home directory nobody cannot enter (pyenv in /root). A venv of the
# system python3.11 whose one .pth adds the .venv's site-packages (site.addsitedir: their .pth files run too).
# One venv per checkout: a venv another worktree made would trace with that worktree's wp_autotrace and torch.
set -eu
REPO=$(cd "$(dirname "$0")/../.." && pwd)
SITE=$REPO/.venv/lib/python3.11/site-packages
V=${TMPDIR:-/tmp}/wp-users-nobody-venv-$(printf %s "$REPO" | md5sum | cut -c1-8)
if [ ! -x "$V/bin/python" ]; then
    /usr/bin/python3.11 -m venv --without-pip "$V" >&2
    echo "import site; site.addsitedir('$SITE')" > "$V/lib/python3.11/site-packages/zz_checkout.pth"
    chmod -R a+rX "$V"
fi
echo "$V/bin/python"
