#!/usr/bin/env bash
# unpack-test-kernel.sh TEST_GUEST OUTDIR
#
# Unpacks the test guest's Debian kernel (TEST_GUEST/debian-kernel.tar.gz,
# built by build-test-guest.sh) into OUTDIR for the module resolver's
# real-kernel test, and writes TEST_GUEST's .key there last. Runs of `make`
# that share the cache may call this at once: it holds the test guest's own
# build lock (so the guest can't be swapped while it is read), unpacks into
# a temporary folder beside OUTDIR (same filesystem) and renames that into
# place, so OUTDIR is briefly absent but never half-unpacked with a key.
# Re-running with an unchanged guest is a no-op.
set -euo pipefail

log() { echo "unpack-test-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 && -n $1 && -n $2 ]] || { echo "usage: $0 TEST_GUEST OUTDIR" >&2; exit 2; }
GUEST=$(realpath -m -- "$1")
OUTDIR=$(realpath -m -- "$2")
PARENT=$(dirname -- "$OUTDIR")
NAME=$(basename -- "$OUTDIR")
mkdir -p -- "$PARENT" "$(dirname -- "$GUEST")"

# The lock build-test-guest.sh takes: the guest and its unpacked kernel
# change under one lock.
exec 9>"$(dirname -- "$GUEST")/.build-test-guest.lock"
flock 9

[[ -s $GUEST/.key && -s $GUEST/debian-kernel.tar.gz ]] || die "no test guest in $GUEST: run make test-guest"
if [[ -f $OUTDIR/.key ]] && cmp -s -- "$OUTDIR/.key" "$GUEST/.key"; then
	exit 0
fi
for d in "$PARENT/.$NAME".*; do # left by a killed run; we hold the lock
	[[ -d $d ]] && rm -rf --one-file-system -- "$d"
done
WORK=$(mktemp -d "$PARENT/.$NAME.XXXXXX")
trap 'rm -rf --one-file-system -- "$WORK"' EXIT
mkdir "$WORK/out"
tar -xzf "$GUEST/debian-kernel.tar.gz" -C "$WORK/out" || die "unpacking $GUEST/debian-kernel.tar.gz failed"
cp -- "$GUEST/.key" "$WORK/out/.key" # written last: its presence means the unpack is complete
if [[ -e $OUTDIR ]]; then mv -- "$OUTDIR" "$WORK/old"; fi
mv -- "$WORK/out" "$OUTDIR"
log "unpacked $GUEST/debian-kernel.tar.gz into $OUTDIR"
