#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the browser tests (tests/site/test_browser.py).
# Playwright drives this browser through executable_path; it never downloads one of its own.
# If Chromium cannot be installed, say so loudly: the browser tests then skip with the same message.
set -u
if [ -n "${ICLR_LAB_CHROMIUM:-}" ] && [ -x "${ICLR_LAB_CHROMIUM}" ]; then
  exit 0
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
fi
echo "ensure_chromium: installing Debian's chromium for the browser tests ..."
if command -v apt-get >/dev/null 2>&1 && \
   { $SUDO apt-get install -y -q chromium >/tmp/ensure_chromium.log 2>&1 || \
     { $SUDO apt-get update -q >>/tmp/ensure_chromium.log 2>&1 && \
       $SUDO apt-get install -y -q chromium >>/tmp/ensure_chromium.log 2>&1; }; }; then
  echo "ensure_chromium: $(chromium --version 2>/dev/null)"
  exit 0
fi
echo "################################################################################"
echo "# ensure_chromium: COULD NOT INSTALL CHROMIUM (see /tmp/ensure_chromium.log).   #"
echo "# The browser tests will be SKIPPED: the built pages are NOT checked in a browser.#"
echo "################################################################################"
exit 0
