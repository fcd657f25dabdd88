#!/usr/bin/env bash
# build-test-guest.sh OUTDIR KERNELDIR
#
# Builds the guest image the tests provision instead of Alpine (which this
# network can't reach): a debootstrapped bookworm rootfs with two kernels,
# and a manifest for each, with relative URLs so the tests can serve OUTDIR
# over loopback HTTP:
#   manifest.json                 the product's own kernel (KERNELDIR/vmlinuz,
#                                 built by build-kernel.sh), no modules
#   manifest-debian-kernel.json   Debian's cloud kernel with its modules, in
#                                 the layout of Alpine's linux-virt: the path
#                                 of images that bring their own kernel
# Runs as root on Debian bookworm. Re-running with unchanged inputs is a no-op.
set -euo pipefail

SUITE=bookworm
KMETA=linux-image-cloud-amd64
INCLUDE=ca-certificates,curl,ripgrep,python3,python3-venv,python3-pip,procps,iproute2,nodejs
# Installed with apt after debootstrap: npm depends on virtual packages that
# debootstrap's resolver can't satisfy.
EXTRA=(npm)
SMOKE=(python3 rg curl node npm) # each must answer --version inside the rootfs

export DEBIAN_FRONTEND=noninteractive LC_ALL=C
log() { echo "build-test-guest: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 && -n $1 && -n $2 ]] || { echo "usage: $0 OUTDIR KERNELDIR" >&2; exit 2; }
[[ $EUID -eq 0 ]] || die "must run as root (debootstrap, chroot)"
OUTDIR=$(realpath -m -- "$1")
KERNELDIR=$(realpath -- "$2")
[[ -s $KERNELDIR/vmlinuz && -s $KERNELDIR/.key ]] || die "no kernel in $KERNELDIR: run make kernel"
PARENT=$(dirname -- "$OUTDIR")
SELF=$(realpath -- "${BASH_SOURCE[0]}")
mkdir -p -- "$PARENT"

# apt_uri SUITE: the first deb URI this machine's apt sources use for SUITE.
# The mirror is never hard-coded: the guest uses whatever the host uses.
apt_uri() {
	local s=$1 f u=
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -e $f ]] || continue
		u=$(awk -v s="$s" 'BEGIN { RS = ""; FS = "\n" } {
			uri = ""; ok = 0
			for (i = 1; i <= NF; i++) {
				n = split($i, w, /[ \t]+/)
				if (w[1] == "URIs:") uri = w[2]
				if (w[1] == "Suites:") for (j = 2; j <= n; j++) if (w[j] == s) ok = 1
			}
			if (ok && uri != "") { print uri; exit }
		}' "$f")
		[[ -n $u ]] && break
	done
	if [[ -z $u ]]; then # one-line format: deb [opts] URI SUITE COMPONENTS...
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[[ -e $f ]] || continue
			u=$(awk -v s="$s" '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == s) { print $i; exit } }' "$f")
			[[ -n $u ]] && break
		done
	fi
	[[ -n $u ]] && echo "${u%/}"
}

# Prerequisites, installed only when missing so a second run installs nothing.
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v depmod >/dev/null || need+=(kmod)
command -v flock >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
	log "installing ${need[*]}"
	apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

MIRROR=$(apt_uri "$SUITE") || die "no apt source for $SUITE in /etc/apt"

# Serialize builders (tests of several packages may call us at once); a
# waiter then finds the winner's output up to date below.
exec 9>"$PARENT/.build-test-guest.lock"
flock 9

# The kernel package the cloud metapackage currently points at, per the
# host's package lists (refreshed only if they don't know the package).
kpkg() { apt-cache depends "$KMETA" 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }'; }
KPKG=$(kpkg) || true
[[ -n $KPKG ]] || { apt-get update -qq; KPKG=$(kpkg); }
[[ -n $KPKG ]] || die "cannot resolve $KMETA"
KPKGVER=$(apt-cache policy "$KPKG" | awk '/Candidate:/ { print $2 }')
KVER=${KPKG#linux-image-}

KKEY=$(<"$KERNELDIR/.key")
KEY=$({ cat "$SELF"; echo "$KKEY"; echo "$KPKG=$KPKGVER"; echo "$INCLUDE ${EXTRA[*]}"; } | sha256sum | cut -d' ' -f1)
if [[ -f $OUTDIR/.key && $(<"$OUTDIR/.key") == "$KEY" ]] &&
	[[ -s $OUTDIR/kernel.tar.gz && -s $OUTDIR/debian-kernel.tar.gz && -s $OUTDIR/rootfs.tar.gz && -s $OUTDIR/manifest.json ]]; then
	log "test guest up to date ($OUTDIR, kernel $KVER)"
	exit 0
fi
log "building into $OUTDIR: kernel $KPKG=$KPKGVER, mirror $MIRROR"

# Everything is built under WORK (same filesystem as OUTDIR) and renamed into
# place at the end, so an interrupted build never leaves a complete-looking
# guest. Cleanup unmounts anything debootstrap left mounted (in containers it
# may bind /dev) before deleting, and never crosses into another filesystem.
remove() {
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$m" || true; done
	rm -rf --one-file-system -- "$1"
}
for d in "$PARENT"/.test-guest.*; do # left by a killed build; we hold the lock
	[[ -d $d ]] && remove "$d"
done
WORK=$(mktemp -d "$PARENT/.test-guest.XXXXXX")
trap 'remove "$WORK"' EXIT
OUT=$WORK/out K=$WORK/kernel ROOT=$WORK/rootfs
mkdir -p "$OUT" "$K/boot" "$K/lib/modules" "$WORK/deb"

# Kernel: unpack the deb (never installed on the host) and reshape it.
(cd "$WORK/deb" && apt-get download -q -o APT::Sandbox::User=root "$KPKG=$KPKGVER")
dpkg-deb -x "$WORK"/deb/*.deb "$WORK/kx"
cp "$WORK/kx/boot/vmlinuz-$KVER" "$K/boot/vmlinuz"
for d in "$WORK/kx/lib/modules/$KVER" "$WORK/kx/usr/lib/modules/$KVER"; do
	[[ -d $d ]] && { cp -a "$d" "$K/lib/modules/"; break; }
done
[[ -f $K/lib/modules/$KVER/modules.order ]] || die "no modules tree for $KVER in $KPKG"
# The deb leaves modules.dep & co to its postinst; generate them so modprobe
# works in the guest, as with Alpine's package.
depmod -b "$K" "$KVER"
# Clamp mtimes to the package's so the tarball is reproducible.
EPOCH=$(stat -c %Y "$WORK/kx/boot/vmlinuz-$KVER")
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" --clamp-mtime \
	-C "$K" -cf - boot lib | gzip -n >"$OUT/debian-kernel.tar.gz"
# The product's own kernel: everything built in, so no modules.
mkdir -p "$WORK/own/boot"
cp "$KERNELDIR/vmlinuz" "$WORK/own/boot/vmlinuz"
# build-kernel.sh swaps KERNELDIR under its own lock: a kernel built by a
# concurrent run since KEY was taken would pair the new image with the old key.
[[ $(<"$KERNELDIR/.key") == "$KKEY" ]] || die "the kernel in $KERNELDIR changed during this build: run it again"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
	-C "$WORK/own" -cf - boot | gzip -n >"$OUT/kernel.tar.gz"

# Root filesystem: reused from the last build when only the kernels
# changed (ROOTFS_REV counts changes to the steps below; bump it with them).
ROOTFS_REV=1
ROOTKEY=$({ echo "$ROOTFS_REV $SUITE $INCLUDE ${EXTRA[*]} ${SMOKE[*]}"; } | sha256sum | cut -d' ' -f1)
if [[ -f $OUTDIR/.rootfs-key && $(<"$OUTDIR/.rootfs-key") == "$ROOTKEY" && -s $OUTDIR/rootfs.tar.gz ]]; then
	log "rootfs up to date: reusing $OUTDIR/rootfs.tar.gz"
	cp -- "$OUTDIR/rootfs.tar.gz" "$OUT/rootfs.tar.gz"
else
	log "debootstrap $SUITE ($INCLUDE)"
	debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
	for s in "$SUITE" "$SUITE-updates" "$SUITE-security"; do # same mirrors as the host
		u=$(apt_uri "$s") && echo "deb $u $s main"
	done >"$ROOT/etc/apt/sources.list"
	if ((${#EXTRA[@]})); then # uses the host's resolv.conf that debootstrap copied in
		log "apt-get install ${EXTRA[*]}"
		{ chroot "$ROOT" apt-get update -q && chroot "$ROOT" apt-get install -y -q --no-install-recommends "${EXTRA[@]}"; } \
			>>"$WORK/debootstrap.log" 2>&1 || { tail -n 30 "$WORK/debootstrap.log" >&2; die "apt-get install failed"; }
	fi
	echo sandbox >"$ROOT/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
	echo "nameserver 10.0.2.3" >"$ROOT/etc/resolv.conf" # QEMU user-mode DNS
	rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/lib/apt/lists/*
	mkdir -p "$ROOT/var/lib/apt/lists/partial"
	for c in "${SMOKE[@]}"; do
		v=$(chroot "$ROOT" "$c" --version 2>&1) || die "$c --version failed in rootfs: $v"
		log "rootfs: $c ${v%%$'\n'*}"
	done
	# /dev is left empty: the guest mounts devtmpfs there.
	tar --numeric-owner --sort=name --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
		-C "$ROOT" -cf - . | gzip -n >"$OUT/rootfs.tar.gz"
fi
echo "$ROOTKEY" >"$OUT/.rootfs-key"

sha() { sha256sum "$OUT/$1" | cut -d' ' -f1; }
KSUM=$(sha kernel.tar.gz) DSUM=$(sha debian-kernel.tar.gz) RSUM=$(sha rootfs.tar.gz)
cat >"$OUT/manifest.json" <<EOF
{"schemaVersion":1,"arch":"amd64","distro":"debian",
 "kernel":{"url":"kernel.tar.gz","sha256":"$KSUM","format":"tar.gz","member":"boot/vmlinuz"},
 "rootfs":{"url":"rootfs.tar.gz","sha256":"$RSUM","format":"tar.gz"}}
EOF
cat >"$OUT/manifest-debian-kernel.json" <<EOF
{"schemaVersion":1,"arch":"amd64","distro":"debian",
 "kernel":{"url":"debian-kernel.tar.gz","sha256":"$DSUM","format":"tar.gz","member":"boot/vmlinuz"},
 "modules":{"url":"debian-kernel.tar.gz","sha256":"$DSUM","format":"tar.gz","dir":"lib/modules/$KVER"},
 "rootfs":{"url":"rootfs.tar.gz","sha256":"$RSUM","format":"tar.gz"}}
EOF
echo "$KEY" >"$OUT/.key" # written last: its presence means the outputs are complete

# Swap the finished build in; OUTDIR is briefly absent, never half-built.
if [[ -e $OUTDIR ]]; then mv -- "$OUTDIR" "$WORK/old"; fi
mv -- "$OUT" "$OUTDIR"
log "done: $OUTDIR ($(du -sh "$OUTDIR" | cut -f1), kernel $KVER)"
