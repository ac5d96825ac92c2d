#!/bin/sh
echo "make demo: not yet — the tinylm demo lands with its issue"
