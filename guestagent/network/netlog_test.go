package network

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

func TestNetLogCoalescesRepeats(t *testing.T) {
	l := newNetLog()
	r := agentproto.NetRefusal{User: "a", Dest: "10.0.2.2", Port: 80, Proto: "tcp", By: agentproto.RefusedByFirewall, Reason: "x"}
	for range 5 {
		l.add(r)
	}
	l.add(agentproto.NetRefusal{User: "b", Dest: "10.0.2.2", Port: 80, Proto: "tcp", By: agentproto.RefusedByFirewall, Reason: "x"})
	l.add(r) // a's previous entry is still a's newest: counted on it
	got := l.read(context.Background(), &agentproto.NetLogRequest{}).Entries
	if len(got) != 2 || got[0].User != "b" || got[1].User != "a" || got[1].Count != 6 || got[1].Last.IsZero() {
		t.Fatalf("entries %+v", got)
	}
	if got[1].Seq <= got[0].Seq {
		t.Errorf("a counted entry must move to the end: %+v", got)
	}
}

// One agent flooding refusals to ever new destinations pushes out only
// its own older entries.
func TestNetLogFloodKeepsOthersEntries(t *testing.T) {
	l := newNetLog()
	l.add(agentproto.NetRefusal{User: "victim", Dest: "10.0.2.2", Port: 22, Reason: "x"})
	for i := range netLogMax * 2 {
		l.add(agentproto.NetRefusal{User: "flooder", Dest: fmt.Sprint("10.0.", i/250, ".", i%250), Port: 80, Reason: "x"})
	}
	resp := l.read(context.Background(), &agentproto.NetLogRequest{Max: agentproto.MaxNetLogEntries})
	if resp.Dropped == 0 {
		t.Error("nothing counted as dropped")
	}
	all := l.read(context.Background(), &agentproto.NetLogRequest{})
	if all.Entries[0].User != "victim" {
		t.Errorf("the victim's entry was pushed out: first is %+v", all.Entries[0])
	}
	n := 0
	for after := uint64(0); ; {
		r := l.read(context.Background(), &agentproto.NetLogRequest{After: after})
		if len(r.Entries) == 0 {
			break
		}
		n += len(r.Entries)
		after = r.Next
	}
	if n != netLogPerUser+1 {
		t.Errorf("%d entries kept, want %d", n, netLogPerUser+1)
	}
}

func TestNetLogFollow(t *testing.T) {
	l := newNetLog()
	l.add(agentproto.NetRefusal{User: "a", Dest: "x", Reason: "1"})
	first := l.read(context.Background(), &agentproto.NetLogRequest{})
	done := make(chan *agentproto.NetLogResponse)
	go func() {
		done <- l.read(context.Background(), &agentproto.NetLogRequest{After: first.Next, WaitMillis: 20000})
	}()
	l.add(agentproto.NetRefusal{User: "a", Dest: "y", Reason: "2"})
	select {
	case r := <-done:
		if len(r.Entries) != 1 || r.Entries[0].Dest != "y" {
			t.Fatalf("follow got %+v", r.Entries)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a waiting reader did not wake on a new entry")
	}
	// An empty wait ends at its deadline; a cursor from before a reboot
	// starts over.
	if r := l.read(context.Background(), &agentproto.NetLogRequest{After: 99, WaitMillis: 1}); len(r.Entries) != 2 {
		t.Errorf("stale cursor: %+v", r.Entries)
	}
}
