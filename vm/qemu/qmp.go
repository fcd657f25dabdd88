//go:build linux

package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
)

// qmpCommand runs one QMP command without arguments on QEMU's monitor.
func qmpCommand(ctx context.Context, sock, command string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("qmp: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	// read returns the next reply, skipping asynchronous events.
	read := func() (map[string]json.RawMessage, error) {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, err
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, err
			}
			if _, ev := m["event"]; !ev {
				return m, nil
			}
		}
	}
	if _, err := read(); err != nil { // greeting
		return fmt.Errorf("qmp greeting: %w", err)
	}
	for _, c := range []string{"qmp_capabilities", command} {
		if _, err := fmt.Fprintf(conn, `{"execute":%q}`+"\n", c); err != nil {
			return fmt.Errorf("qmp %s: %w", c, err)
		}
		m, err := read()
		if err != nil {
			return fmt.Errorf("qmp %s: %w", c, err)
		}
		if e, ok := m["error"]; ok {
			return fmt.Errorf("qmp %s: %s", c, e)
		}
	}
	return nil
}
