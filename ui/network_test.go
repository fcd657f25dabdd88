package ui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// netLogBackend adds a refusal log to the fake backend: NetLog answers
// with what push queued, long-polling like the guest.
type netLogBackend struct {
	*fakeBackend
	mu      sync.Mutex
	entries []agentproto.NetRefusal
	err     error
	changed chan struct{}
}

func (b *netLogBackend) push(e agentproto.NetRefusal, err error) {
	b.mu.Lock()
	if err == nil {
		e.Seq = uint64(len(b.entries) + 1)
		b.entries = append(b.entries, e)
	}
	b.err = err
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func (b *netLogBackend) NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error) {
	for {
		b.mu.Lock()
		err, ch := b.err, b.changed
		resp := agentproto.NetLogResponse{Next: req.After}
		for _, e := range b.entries {
			if e.Seq > req.After {
				resp.Entries = append(resp.Entries, e)
				resp.Next = e.Seq
			}
		}
		b.mu.Unlock()
		if err != nil {
			return agentproto.NetLogResponse{}, err
		}
		if len(resp.Entries) > 0 {
			return resp, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return resp, nil
		}
	}
}

func TestNetworkTabShowsRefusalsAsTheyHappen(t *testing.T) {
	b := &netLogBackend{fakeBackend: newFake(t), changed: make(chan struct{})}
	w, reg := newTestWindow(t, b)
	a, err := reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	hasTab := false
	for _, it := range w.Tabs.Items {
		hasTab = hasTab || it.Text == "Network"
	}
	if w.Network == nil || !hasTab {
		t.Fatalf("no Network tab: %+v", w.Tabs.Items)
	}
	row := func(i int) (s string) {
		if i >= w.Network.List.Length() {
			return ""
		}
		o := w.Network.List.CreateItem()
		w.Network.List.UpdateItem(i, o)
		return o.(*widget.Label).Text
	}
	now := time.Now()
	b.push(agentproto.NetRefusal{Time: now, Count: 1, User: a.User(), Dest: "10.0.2.2", Port: 8080, Proto: "tcp",
		By: agentproto.RefusedByFirewall, Reason: "the address is in a range no agent may reach"}, nil)
	eventually(t, "the first refusal", func() bool {
		r := row(0)
		return strings.Contains(r, "Alice") && strings.Contains(r, "10.0.2.2:8080/tcp") && strings.Contains(r, "firewall")
	})
	b.push(agentproto.NetRefusal{Time: now, Count: 3, Last: now, User: a.User(), Plugin: "fetcher", Dest: "other.example.com", Port: 443,
		By: agentproto.RefusedByProxy, Reason: "the name is not in the agent's network policy"}, nil)
	eventually(t, "the newest refusal on top", func() bool {
		r := row(0)
		return strings.Contains(r, "Alice (fetcher)") && strings.Contains(r, "other.example.com:443") && strings.Contains(r, "3 times") &&
			strings.Contains(row(1), "10.0.2.2") && strings.Contains(w.Network.Status.Text, "2 refused connections")
	})
	b.push(agentproto.NetRefusal{}, errors.New("the VM is not running"))
	eventually(t, "the error", func() bool { return strings.Contains(w.Network.Status.Text, "the VM is not running") })
}
