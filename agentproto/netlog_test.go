package agentproto

import (
	"strings"
	"testing"
	"time"
)

func TestFormatRefusal(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		e     NetRefusal
		agent string
		want  []string
	}{
		{NetRefusal{Time: at, Count: 1, User: "agent-a", Dest: "10.0.2.2", Port: 8080, Proto: "tcp", By: RefusedByFirewall, Reason: "denied"},
			"Alice", []string{"2026-11-23 10:00:00", "Alice", "10.0.2.2:8080/tcp", "firewall", "denied"}},
		{NetRefusal{Time: at, Count: 4, Last: at.Add(time.Minute), User: "agent-a", Plugin: "fetcher", Dest: "fe80::1", Port: 53, Proto: "udp", By: RefusedByFirewall, Reason: "dns"},
			"", []string{"agent-a (fetcher)", "[fe80::1]:53/udp", "(4 times, last 10:01:00)"}},
		{NetRefusal{Time: at, Count: 1, Dest: "?", By: RefusedByFirewall, Reason: "lost"}, "", []string{"(unknown source)", " ? "}},
	} {
		got := FormatRefusal(tc.e, tc.agent)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("FormatRefusal(%+v) = %q, want it to contain %q", tc.e, got, w)
			}
		}
	}
}
