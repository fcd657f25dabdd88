package agentproto

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A virtio-serial port is one byte stream for the life of the VM. When the
// host side goes away and another host connects soon after (an owner that
// crashed, then the next one adopting the VM), the guest may never read
// EOF: its old session keeps the port, and bytes it still had queued reach
// the new host, in the middle of a frame. So before the yamux session
// starts, the host claims the stream with a fresh nonce:
//
//	host → guest  SYN(nonce)    repeated (claimRepeat, backing off) until answered
//	guest → host  ACK(nonce)    once per nonce
//	host → guest  START(nonce)  then both start yamux
//
// The host discards what arrives before ACK(nonce), the old session's
// leftovers; the guest discards what arrives before a SYN and, after its
// ACK, the repeated SYNs before START. A marker starts with 0xff, which is
// no yamux version, so an old guest session still reading the port fails
// at its next frame and lets the port go; its close drops the bytes the
// guest had buffered, which is why the host repeats the SYN. A newer SYN
// (another host taking over mid-claim) supersedes the one being answered.
//
// vsock needs none of this: every connection is its own stream.

// claimMagic starts every claim marker; then a kind byte and the nonce.
const claimMagic = "\xffosaurus-claim"

const (
	claimSyn   = 'S'
	claimAck   = 'A'
	claimStart = 'G'
	nonceLen   = 16
	markerLen  = len(claimMagic) + 1 + nonceLen

	// claimRepeat first spaces the host's SYNs. The first is sent at once;
	// a repeat is needed only after an old session swallowed one.
	claimRepeat = 100 * time.Millisecond
)

// ErrClaim: the claim handshake on a shared stream failed.
var ErrClaim = errors.New("claiming the agent channel")

func marker(kind byte, nonce []byte) []byte {
	m := make([]byte, 0, markerLen)
	m = append(m, claimMagic...)
	m = append(m, kind)
	return append(m, nonce...)
}

// markerScanner recognizes markers in a byte stream read one byte at a
// time: the last markerLen bytes, checked after each.
type markerScanner struct{ win []byte }

// push adds b and reports the marker ending at it, if any.
func (s *markerScanner) push(b byte) (kind byte, nonce []byte, ok bool) {
	if len(s.win) == markerLen {
		copy(s.win, s.win[1:])
		s.win = s.win[:markerLen-1]
	}
	s.win = append(s.win, b)
	if len(s.win) < markerLen || !bytes.HasPrefix(s.win, []byte(claimMagic)) {
		return 0, nil, false
	}
	return s.win[len(claimMagic)], bytes.Clone(s.win[len(claimMagic)+1:]), true
}

// ClaimStream is the host's side of the claim on a shared stream (a
// virtio-serial port): it returns conn ready for NewClientPeer once the
// guest has answered this claim, or an ErrClaim when ctx ends first.
func ClaimStream(ctx context.Context, conn net.Conn) (net.Conn, error) {
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	syn := marker(claimSyn, nonce)

	// Unblock the read and the writes below when ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	var wg sync.WaitGroup
	quit := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Backing off to a second keeps what queues up while the guest
		// boots (QEMU holds it until the port is opened) small.
		every := claimRepeat
		for {
			if _, err := conn.Write(syn); err != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-time.After(every):
			}
			every = min(2*every, time.Second)
		}
	}()
	stopSyn := func() { close(quit); wg.Wait() }

	br := bufio.NewReaderSize(conn, 64<<10)
	var sc markerScanner
	for {
		b, err := br.ReadByte()
		if err != nil {
			stopSyn()
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, fmt.Errorf("%w: %w", ErrClaim, err)
		}
		if kind, n, ok := sc.push(b); ok && kind == claimAck && bytes.Equal(n, nonce) {
			break
		}
	}
	// No SYN may follow the START: the guest reads yamux after it.
	stopSyn()
	if _, err := conn.Write(marker(claimStart, nonce)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClaim, err)
	}
	if !stop() {
		return nil, fmt.Errorf("%w: %w", ErrClaim, context.Cause(ctx))
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads first what the claim read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// AcceptClaim is the guest's side: it reads rw one byte at a time (nothing
// past the START is consumed) until a host has claimed the stream, then
// the caller starts the session on rw. It fails only when rw does (EOF:
// no host connected).
func AcceptClaim(rw io.ReadWriter) error {
	var sc markerScanner
	var acked []byte // the nonce answered, waiting for its START
	buf := make([]byte, 1)
	for {
		if _, err := io.ReadFull(rw, buf); err != nil {
			return err
		}
		kind, nonce, ok := sc.push(buf[0])
		if !ok {
			continue
		}
		switch {
		case kind == claimSyn && !bytes.Equal(nonce, acked):
			if _, err := rw.Write(marker(claimAck, nonce)); err != nil {
				return err
			}
			acked = nonce
		case kind == claimStart && acked != nil && bytes.Equal(nonce, acked):
			return nil
		}
	}
}
