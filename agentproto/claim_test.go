package agentproto

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// serveHello serves hello on conn as the guest would after a claim.
func serveHello(conn net.Conn) {
	peer, err := NewServerPeer(conn)
	if err != nil {
		return
	}
	m := NewMux()
	m.Handle(OpHello, Unary(func(context.Context, *HelloRequest) (*HelloResponse, error) {
		return &HelloResponse{Major: VersionMajor, Minor: VersionMinor, Distro: "claimed"}, nil
	}))
	peer.Serve(context.Background(), m)
}

func hello(t *testing.T, conn net.Conn) {
	t.Helper()
	peer, err := NewClientPeer(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Handshake(ctx, peer)
	if err != nil {
		t.Fatalf("hello after the claim: %v", err)
	}
	if c.Info.Distro != "claimed" {
		t.Fatalf("hello answered by %q", c.Info.Distro)
	}
}

// The guest's side of the stream before the claim: what an old session
// left (half a yamux frame, then a whole one) and what the old host had
// sent. The new session must start clean after it, in both directions.
func TestClaimSkipsAnOldSessionsLeftovers(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	errc := make(chan error, 1)
	go func() {
		// Bytes of the old host's session, still unread in the port.
		// Old session output the new host must skip: a partial frame
		// header, then garbage, written before the guest's ACK.
		if _, err := guest.Write([]byte{0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 1, 0, 'x', 'y'}); err != nil {
			errc <- err
			return
		}
		errc <- AcceptClaim(guest)
		serveHello(guest)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := ClaimStream(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("guest side of the claim: %v", err)
	}
	hello(t, conn)
}

// A later claim supersedes one the guest is answering: the host that
// gave up mid-claim is replaced by the next, on the same stream.
func TestLaterClaimSupersedes(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	errc := make(chan error, 1)
	go func() { errc <- AcceptClaim(guest); serveHello(guest) }()

	// A first host sends its SYN, reads the ACK and goes away before
	// sending START.
	stale := make([]byte, nonceLen)
	stale[0] = 1
	if _, err := host.Write(marker(claimSyn, stale)); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, markerLen)
	if _, err := io.ReadFull(host, ack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := ClaimStream(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("guest side of the claim: %v", err)
	}
	hello(t, conn)
}

// An old guest session still reading the port ends at the claim's first
// byte, letting the port go to a new session.
func TestClaimEndsAnOldGuestSession(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	old, err := NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	go old.Serve(context.Background(), NewMux())
	go io.Copy(io.Discard, host) // the old session's own output
	if _, err := host.Write(marker(claimSyn, make([]byte, nonceLen))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old session still holds the stream 10 s after a claim")
	}
}

// Nobody answering: the claim ends with ctx, as ErrClaim.
func TestClaimEndsWithContext(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	go io.Copy(io.Discard, guest)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := ClaimStream(ctx, host); !errors.Is(err, ErrClaim) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim with no guest: %v, want ErrClaim and the deadline", err)
	}
}
