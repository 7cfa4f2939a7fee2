#!/usr/bin/env bash
# Run a dead (or any finished) job again (admin).
# usage: job-retry.sh JOB_ID
source "$(dirname "$0")/_lib.sh"
[ $# -eq 1 ] && is_int "$1" || usage
api POST "/admin/v1/jobs/$1/retry"
