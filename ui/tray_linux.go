//go:build linux

package ui

import (
	"context"
	"time"

	"github.com/godbus/dbus/v5"
)

// statusNotifierWatcher is the D-Bus name a tray host (the panel of KDE,
// GNOME with the AppIndicator extension, XFCE, ...) owns; Fyne's tray
// icon registers with it. Without it the icon shows nowhere.
const statusNotifierWatcher = "org.kde.StatusNotifierWatcher"

// hasTrayHost reports whether the session bus has a tray host. No session
// bus (plain Xvfb, a bare X server) means no tray; the bus is never
// auto-launched just to ask.
func hasTrayHost() bool {
	conn, err := dbus.SessionBusPrivateNoAutoStartup()
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		return false
	}
	if err := conn.Hello(); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var has bool
	err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, statusNotifierWatcher).Store(&has)
	return err == nil && has
}
