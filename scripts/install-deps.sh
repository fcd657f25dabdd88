#!/usr/bin/env bash
# Installs the system packages the app and its tests need, and only those
# that are missing, so a second run does nothing. Debian and Ubuntu only;
# on macOS the app needs no system packages.
#
# What it can't install, it checks and says how to get: Go (the version
# go.mod names or newer; distributions ship older ones) and hardware
# virtualisation (KVM), without which the VM runs, slower, under TCG.
set -euo pipefail
cd "$(dirname "$0")/.."

# Go: the build runs with GOTOOLCHAIN=local, so an older go stops at once.
need_go=$(sed -n 's/^go //p' go.mod)
go_how="install Go $need_go or newer yourself (this script doesn't): download it from https://go.dev/dl/, unpack it to /usr/local/go (or anywhere) and put its bin folder on PATH, e.g. export PATH=/usr/local/go/bin:\$PATH"
if ! command -v "${GO:-go}" >/dev/null; then
	echo "install-deps: Go is not installed; $go_how" >&2
	exit 1
fi
have_go=$(GOTOOLCHAIN=local "${GO:-go}" env GOVERSION 2>/dev/null | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
	echo "install-deps: Go $have_go is too old, go.mod needs $need_go; $go_how" >&2
	exit 1
fi

case "$(uname -s)" in
Darwin) exit 0 ;;
Linux) ;;
*) echo "install-deps: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac
# KVM: not a package; the VM still runs without it, under TCG (several
# times slower), so this is a note, not a failure.
if [ ! -e /dev/kvm ]; then
	echo "install-deps: note: no /dev/kvm, so the VM will run under TCG emulation (works, several times slower); enable virtualisation (VT-x/AMD-V) in the firmware, or nested virtualisation for a VM, to get KVM" >&2
elif [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	echo "install-deps: note: /dev/kvm is there but you can't use it, so the VM will run under TCG (slower); add yourself to its group: sudo usermod -aG kvm \$USER, then log in again" >&2
fi

case "$(uname -m)" in
aarch64 | arm64) qemu=qemu-system-arm ;;
*) qemu=qemu-system-x86 ;;
esac

# what each group of make targets needs
run_pkgs=("$qemu" qemu-system-common gcc libgl1-mesa-dev xorg-dev libxkbcommon-dev libwayland-dev)
# gnome-keyring and dbus-daemon (dbus-run-session) give the secrets tests a
# real Secret Service; zsh and fish load the CLI's completion scripts;
# tmux is the terminal the `shell` tests type into; the remote-context
# tests start their own sshd on loopback (openssh-server) and reach it
# with ssh (openssh-client).
test_pkgs=(e2fsprogs debootstrap cpio ca-certificates squashfs-tools xvfb xdotool imagemagick gnome-keyring dbus-daemon dbus-bin zsh fish tmux openssh-server openssh-client)

want=("${run_pkgs[@]}")
[ "${1:-run}" = test ] && want+=("${test_pkgs[@]}")

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
	echo "install-deps: no apt-get (not Debian or Ubuntu); install your distribution's packages for these yourself: ${want[*]}" >&2
	exit 1
fi

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
