package host

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/host/api"
)

// ports close reaches the owner's previews: the chosen agent's listeners
// close, the others stay, and the list `ports` reads follows.
func TestClosePorts(t *testing.T) {
	p := &Ports{StateFile: filepath.Join(t.TempDir(), "previews.json")}
	open := func(agent string, port int) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		p.mu.Lock()
		p.list = append(p.list, &Preview{Preview: api.Preview{Agent: agent, Port: port, HostPort: ln.Addr().(*net.TCPAddr).Port}, ln: ln})
		p.saveLocked()
		p.mu.Unlock()
		return ln.Addr().String()
	}
	a1, a2, b := open("alice", 8000), open("alice", 9000), open("bob", 8000)
	th := &ToolHost{Ports: p}
	tests := []struct {
		req    api.ClosePortsRequest
		closed int
		gone   []string
		left   int
	}{
		{api.ClosePortsRequest{Agent: "alice", Port: 9000}, 1, []string{a2}, 2},
		{api.ClosePortsRequest{Agent: "carol"}, 0, nil, 2},
		{api.ClosePortsRequest{Agent: "alice"}, 1, []string{a1}, 1},
		{api.ClosePortsRequest{}, 1, []string{b}, 0},
	}
	for _, tt := range tests {
		r, err := th.ClosePorts(context.Background(), tt.req)
		if err != nil || r.Closed != tt.closed {
			t.Fatalf("%+v: closed %d, %v; want %d", tt.req, r.Closed, err, tt.closed)
		}
		for _, addr := range tt.gone {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Fatalf("%+v: %s still accepts", tt.req, addr)
			}
		}
		list, err := ReadPreviews(p.StateFile)
		if err != nil || len(list) != tt.left {
			t.Fatalf("%+v: the list holds %d, %v; want %d", tt.req, len(list), err, tt.left)
		}
	}
}
