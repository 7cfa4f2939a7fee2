#!/usr/bin/env bash
# List dead jobs (discarded after their last attempt) with every attempt's error (admin).
# usage: jobs-dead.sh [limit]
source "$(dirname "$0")/_lib.sh"
[ $# -le 1 ] || usage
api GET "/admin/v1/jobs/dead${1:+?limit=$1}"
