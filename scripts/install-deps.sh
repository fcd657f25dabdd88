#!/usr/bin/env bash
# Installs the system packages the app and its tests need, and only those
# that are missing, so a second run does nothing. Debian and Ubuntu only;
# on macOS the app needs no system packages.
set -euo pipefail

case "$(uname -s)" in
Darwin) exit 0 ;;
Linux) ;;
*) echo "install-deps: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac
if ! command -v apt-get >/dev/null; then
	echo "install-deps: no apt-get; install these yourself: $*" >&2
	exit 1
fi

case "$(uname -m)" in
aarch64 | arm64) qemu=qemu-system-arm ;;
*) qemu=qemu-system-x86 ;;
esac

# what each group of make targets needs
run_pkgs=("$qemu" qemu-system-common gcc libgl1-mesa-dev xorg-dev libxkbcommon-dev libwayland-dev)
# gnome-keyring and dbus-daemon (dbus-run-session) give the secrets tests a
# real Secret Service; zsh and fish load the CLI's completion scripts;
# tmux is the terminal the `shell` tests type into.
test_pkgs=(e2fsprogs debootstrap cpio ca-certificates squashfs-tools xvfb xdotool imagemagick gnome-keyring dbus-daemon dbus-bin zsh fish tmux)

want=("${run_pkgs[@]}")
[ "${1:-run}" = test ] && want+=("${test_pkgs[@]}")

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
