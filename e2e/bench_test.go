//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// BenchmarkBootToFirstExec measures a cold boot of the provisioned guest
// until a first command has run, then a hard stop.
func BenchmarkBootToFirstExec(b *testing.B) {
	requireGuest(b)
	spec := bootSpec(b, bootOpts{})
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		if _, err := m.Agent().Exec(ctx, agentproto.ExecRequest{Argv: []string{"true"}}, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Kill()
		cancel()
		b.StartTimer()
	}
}

// BenchmarkExecTrue measures one exec round trip of `true`.
func BenchmarkExecTrue(b *testing.B) {
	m := boot(b, bootOpts{})
	ctx := context.Background()
	for b.Loop() {
		st, err := m.Agent().Exec(ctx, agentproto.ExecRequest{Argv: []string{"true"}}, nil, nil, nil)
		if err != nil || st.Code != 0 {
			b.Fatal(err, st)
		}
	}
}

// BenchmarkFileWriteRead1MiB writes a 1 MiB file through the agent and
// reads it back.
func BenchmarkFileWriteRead1MiB(b *testing.B) {
	m := boot(b, bootOpts{})
	ctx := context.Background()
	data := make([]byte, 1<<20)
	rand.Read(data)
	b.SetBytes(2 << 20)
	for b.Loop() {
		if _, err := m.Agent().WriteFile(ctx, agentproto.WriteFileRequest{Path: "/root/bench.bin", Data: data}); err != nil {
			b.Fatal(err)
		}
		r, err := m.Agent().ReadFile(ctx, agentproto.ReadFileRequest{Path: "/root/bench.bin"})
		if err != nil || !bytes.Equal(r.Data, data) {
			b.Fatal(err, len(r.Data))
		}
	}
}
