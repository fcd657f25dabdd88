package agentproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// The host parses every byte the guest sends: frames, response envelopes
// and bodies, exec and file streams. These targets feed it arbitrary
// bytes where the guest would; the seeds are well-formed exchanges.

// frame builds one frame's bytes.
func frame(t FrameType, payload []byte) []byte {
	var b bytes.Buffer
	WriteFrame(&b, t, payload)
	return b.Bytes()
}

// FuzzReadFrame: any bytes read as a frame either fail or give a frame
// that writes back to the same bytes; a length header never makes the
// reader allocate more than the bytes that actually arrive.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(FrameResponse, []byte(`{"body":{}}`)))
	f.Add(frame(FrameStdout, []byte("hello")))
	f.Add(frame(FrameDataEnd, nil))
	f.Add([]byte{'D', 0x03, 0xff, 0xff, 0xff, 'x'}) // a 64 MiB header with one byte behind it
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, payload, err := ReadFrame(bytes.NewReader(data))
		if err != nil {
			return
		}
		if got := frame(typ, payload); !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("frame %c of %d bytes writes back as %x, read from %x", typ, len(payload), got, data)
		}
	})
}

// FuzzDecodeResponse: a response frame's payload decodes into every
// response type the host reads, or fails with ErrProtocol or a remote
// error; it never panics.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"body":{"major":1,"minor":5,"distro":"debian"}}`))
	f.Add([]byte(`{"error":{"code":"not_found","message":"no such file"}}`))
	f.Add([]byte(`{"body":{"entries":[{"user":"agent-a","dest":"10.0.2.2","port":80}],"next":3}}`))
	f.Add([]byte(`{"body":{"entries":[{"name":"a","size":-1,"mode":4294967295}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		outs := []any{&HelloResponse{}, &StartBackgroundResponse{}, &ReadFileResponse{}, &WriteFileResponse{}, &ListResponse{},
			&UserAddResponse{}, &UsageResponse{}, &NetLogResponse{}, &ExitStatus{}, &FileInfo{}}
		for _, out := range outs {
			err := decodeResponse("fuzz", data, out)
			if err == nil {
				if nl, ok := out.(*NetLogResponse); ok {
					for _, e := range nl.Entries {
						FormatRefusal(e, "agent")
					}
				}
				continue
			}
			var re *RemoteError
			if !errors.Is(err, ErrProtocol) && !errors.As(err, &re) {
				t.Fatalf("decode into %T: unexpected error %v", out, err)
			}
		}
	})
}

// fakeGuest answers every call of op with an accepted response, then the
// fuzzed bytes as the rest of the stream, as a guest could.
func fakeGuest(t *testing.T, op string, stream []byte) *Client {
	m := NewMux()
	m.Handle(op, func(ctx context.Context, c *Call) error {
		var raw json.RawMessage
		c.Decode(&raw)
		conn, err := c.Accept()
		if err != nil {
			return err
		}
		conn.Write(stream)
		conn.Close()
		return ErrHijacked
	})
	return pair(t, m)
}

// FuzzGuestStreams: the host's exec and read_file clients read whatever
// a guest sends after accepting the call (output, exit and data frames)
// and end with a result or an error, within a bounded time, without
// panicking or taking more than the call's limits.
func FuzzGuestStreams(f *testing.F) {
	exit, _ := json.Marshal(ExitStatus{Code: 3})
	f.Add(append(append(frame(FrameStdout, []byte("out")), frame(FrameStderr, []byte("err"))...), frame(FrameExit, exit)...))
	f.Add(append(frame(FrameData, []byte("file body")), frame(FrameDataEnd, nil)...))
	f.Add(frame(FrameExit, []byte(`{"code":-1,"signal":999999,"timed_out":true}`)))
	f.Add([]byte{'D', 0, 0, 0, 5, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c := fakeGuest(t, OpExec, data)
		var out, errOut bytes.Buffer
		c.Exec(ctx, ExecRequest{Argv: []string{"true"}}, nil, &out, &errOut)
		c = fakeGuest(t, OpReadFile, data)
		if r, err := c.ReadFile(ctx, ReadFileRequest{Path: "/x", MaxBytes: 1 << 10}); err == nil && len(r.Data) > len(data) {
			t.Fatalf("read %d bytes from a %d-byte stream", len(r.Data), len(data))
		}
		if ctx.Err() != nil {
			t.Fatalf("a call on a stream of %d bytes did not end: %v", len(data), ctx.Err())
		}
	})
}
