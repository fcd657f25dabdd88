//go:build linux

package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
)

// closeWindow asks the window with id win on X display (":N") to close
// itself the way a window manager's close button does: a WM_DELETE_WINDOW
// client message. Plain Xvfb has no window manager to send it, and
// xdotool can only destroy or kill windows, which is not what a user
// does. Speaks just enough of the X11 protocol (no auth: the test's own
// Xvfb).
func closeWindow(display string, win uint32) error {
	conn, err := net.Dial("unix", "/tmp/.X11-unix/X"+strings.TrimPrefix(display, ":"))
	if err != nil {
		return err
	}
	defer conn.Close()
	le := binary.LittleEndian
	// Connection setup: little-endian, protocol 11.0, no authorisation.
	setup := make([]byte, 12)
	setup[0] = 'l'
	le.PutUint16(setup[2:], 11)
	if _, err := conn.Write(setup); err != nil {
		return err
	}
	head := make([]byte, 8)
	if _, err := io.ReadFull(conn, head); err != nil {
		return err
	}
	if head[0] != 1 {
		return fmt.Errorf("X server refused the connection (status %d)", head[0])
	}
	if _, err := io.ReadFull(conn, make([]byte, int(le.Uint16(head[6:]))*4)); err != nil {
		return err
	}
	reply := func() ([]byte, error) {
		b := make([]byte, 32)
		if _, err := io.ReadFull(conn, b); err != nil {
			return nil, err
		}
		if b[0] == 0 {
			return nil, fmt.Errorf("X error code %d", b[1])
		}
		if n := le.Uint32(b[4:]); n > 0 { // extra reply data
			if _, err := io.ReadFull(conn, make([]byte, n*4)); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	atom := func(name string) (uint32, error) {
		pad := (4 - len(name)%4) % 4
		req := make([]byte, 8+len(name)+pad)
		req[0] = 16 // InternAtom
		le.PutUint16(req[2:], uint16(len(req)/4))
		le.PutUint16(req[4:], uint16(len(name)))
		copy(req[8:], name)
		if _, err := conn.Write(req); err != nil {
			return 0, err
		}
		b, err := reply()
		if err != nil {
			return 0, fmt.Errorf("InternAtom %s: %w", name, err)
		}
		return le.Uint32(b[8:]), nil
	}
	protocols, err := atom("WM_PROTOCOLS")
	if err != nil {
		return err
	}
	del, err := atom("WM_DELETE_WINDOW")
	if err != nil {
		return err
	}
	req := make([]byte, 44)
	req[0] = 25 // SendEvent, no propagation
	le.PutUint16(req[2:], 11)
	le.PutUint32(req[4:], win) // destination; event mask 0: the owner gets it
	ev := req[12:]
	ev[0] = 33 // ClientMessage
	ev[1] = 32 // format
	le.PutUint32(ev[4:], win)
	le.PutUint32(ev[8:], protocols)
	le.PutUint32(ev[12:], del) // data[0]; data[1] is CurrentTime (0)
	if _, err := conn.Write(req); err != nil {
		return err
	}
	// GetInputFocus: its reply proves the server handled the event.
	if _, err := conn.Write([]byte{43, 0, 1, 0}); err != nil {
		return err
	}
	_, err = reply()
	return err
}
