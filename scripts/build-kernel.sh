#!/usr/bin/env bash
# build-kernel.sh ARCH OUTDIR
#
# Builds the sandbox guest's own kernel for ARCH (amd64 or arm64) from
# Debian's linux-source-6.1: `make tinyconfig`, then the fragments in
# assets/kernel (common.config and ARCH's), then `make olddefconfig`.
# OUTDIR receives the kernel image (vmlinuz: bzImage on amd64, the raw
# Image on arm64), the full .config as config, and .key. A rebuild
# happens only when the source package's version, the fragments, the
# compiler or this script change. Runs as root on Debian bookworm.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive LC_ALL=C
log() { echo "build-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 && -n $1 && -n $2 ]] || { echo "usage: $0 amd64|arm64 OUTDIR" >&2; exit 2; }
ARCH=$1
OUTDIR=$(realpath -m -- "$2")
PARENT=$(dirname -- "$OUTDIR")
SELF=$(realpath -- "${BASH_SOURCE[0]}")
FRAGDIR=$(realpath -- "$(dirname -- "$SELF")/../assets/kernel")
SRCPKG=linux-source-6.1
TARBALL=/usr/src/$SRCPKG.tar.xz

case $ARCH in
amd64) KARCH=x86_64 IMAGE=arch/x86/boot/bzImage FRAG=x86_64.config CROSS= CROSSPKG= ;;
arm64) KARCH=arm64 IMAGE=arch/arm64/boot/Image FRAG=arm64.config CROSS=aarch64-linux-gnu- CROSSPKG=gcc-aarch64-linux-gnu ;;
*) die "ARCH must be amd64 or arm64, not $ARCH" ;;
esac
[[ $(uname -m) == aarch64 && $ARCH == arm64 ]] && CROSS= CROSSPKG=

# Prerequisites, installed only when missing so a second run installs nothing.
need=()
dpkg-query -W -f='${Status}' "$SRCPKG" 2>/dev/null | grep -q 'ok installed' || need+=("$SRCPKG")
for p in bc flex bison libelf-dev libssl-dev make gcc lz4 $CROSSPKG; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if ((${#need[@]})); then
	log "installing ${need[*]}"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } ||
		die "apt-get install ${need[*]} failed"
fi
[[ -f $TARBALL ]] || die "$TARBALL missing after installing $SRCPKG"

SRCVER=$(dpkg-query -W -f='${Version}' "$SRCPKG")
CC_VERSION=$("${CROSS}gcc" --version | head -n1)
mkdir -p -- "$PARENT"
KEY=$({ cat "$SELF" "$FRAGDIR/common.config" "$FRAGDIR/$FRAG"; echo "$SRCPKG=$SRCVER $ARCH $CC_VERSION"; } | sha256sum | cut -d' ' -f1)
if [[ -f $OUTDIR/.key && $(<"$OUTDIR/.key") == "$KEY" && -s $OUTDIR/vmlinuz ]]; then
	log "kernel up to date ($OUTDIR, $SRCPKG $SRCVER)"
	exit 0
fi

# Serialize builders; a waiter then finds the winner's output up to date.
exec 9>"$PARENT/.build-kernel-$ARCH.lock"
flock 9
if [[ -f $OUTDIR/.key && $(<"$OUTDIR/.key") == "$KEY" && -s $OUTDIR/vmlinuz ]]; then
	log "kernel up to date ($OUTDIR, $SRCPKG $SRCVER)"
	exit 0
fi
for d in "$PARENT"/.kernel-"$ARCH".*; do # left by a killed build; we hold the lock
	[[ -d $d ]] && rm -rf -- "$d"
done
WORK=$(mktemp -d "$PARENT/.kernel-$ARCH.XXXXXX")
trap 'rm -rf -- "$WORK"' EXIT
START=$(date +%s)
log "building $ARCH from $SRCPKG $SRCVER into $OUTDIR ($(nproc) jobs)"
tar -xf "$TARBALL" -C "$WORK"
SRC=$WORK/$SRCPKG
# The fragments keep a reason on each line; Kconfig reads bare assignments.
sed -e 's/[[:space:]]*#.*$//' -e '/^$/d' "$FRAGDIR/common.config" "$FRAGDIR/$FRAG" >"$WORK/fragment.config"
# Reproducible: no timestamp, user or host of this machine in the image.
export KBUILD_BUILD_TIMESTAMP="@0" KBUILD_BUILD_USER=osaurus KBUILD_BUILD_HOST=sandbox
MK=(make -C "$SRC" ARCH="$KARCH" CROSS_COMPILE="$CROSS" -s)
"${MK[@]}" tinyconfig >/dev/null
"$SRC/scripts/kconfig/merge_config.sh" -m -O "$SRC" "$SRC/.config" "$WORK/fragment.config" >"$WORK/merge.log" 2>&1 ||
	{ cat "$WORK/merge.log" >&2; die "merging the fragment failed"; }
"${MK[@]}" olddefconfig >/dev/null
# Every option the fragment sets must have survived: one that didn't is a
# missing dependency, and the guest would boot without it.
missing=()
while IFS='=' read -r opt val; do
	if [[ $val == n ]]; then
		grep -qx "$opt=y" "$SRC/.config" && missing+=("$opt=n (still y)")
	else
		grep -qx "$opt=$val" "$SRC/.config" || missing+=("$opt=$val")
	fi
done <"$WORK/fragment.config"
((${#missing[@]} == 0)) || die "the kernel configuration lacks ${missing[*]}: an option it depends on is not in assets/kernel"
"${MK[@]}" -j"$(nproc)" "${IMAGE#arch/*/boot/}" >"$WORK/build.log" 2>&1 ||
	{ tail -n 40 "$WORK/build.log" >&2; die "kernel build failed"; }
OUT=$WORK/out
mkdir -p "$OUT"
cp "$SRC/$IMAGE" "$OUT/vmlinuz"
cp "$SRC/.config" "$OUT/config"
echo "$SRCPKG $SRCVER $ARCH $(( $(date +%s) - START ))s" >"$OUT/build-info"
echo "$KEY" >"$OUT/.key" # written last: its presence means the outputs are complete
if [[ -e $OUTDIR ]]; then mv -- "$OUTDIR" "$WORK/old"; fi
mv -- "$OUT" "$OUTDIR"
log "done: $OUTDIR/vmlinuz ($(du -h "$OUTDIR/vmlinuz" | cut -f1)) in $(( $(date +%s) - START ))s"
