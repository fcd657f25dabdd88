package agentproto

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// FrameType says what a frame's payload holds.
type FrameType byte

const (
	FrameRequest  FrameType = 'Q' // JSON requestEnvelope
	FrameResponse FrameType = 'R' // JSON responseEnvelope
	FrameStdin    FrameType = 'I' // raw bytes
	FrameStdinEOF FrameType = 'i' // empty
	FrameStdout   FrameType = 'O' // raw bytes
	FrameStderr   FrameType = 'E' // raw bytes
	FrameSignal   FrameType = 'S' // JSON SignalFrame
	FrameExit     FrameType = 'X' // JSON ExitStatus
	FrameData     FrameType = 'D' // raw file bytes (read_file, write_file)
	FrameDataEnd  FrameType = 'd' // empty: the file body is complete
	FrameResize   FrameType = 'W' // JSON Winsize: a terminal's new size (minor 9)
)

// MaxFrame bounds one frame's payload so a corrupt length can't make a peer
// allocate gigabytes. File bodies above this must be chunked by the caller.
const MaxFrame = 64 << 20

// WriteFrame writes one frame. Callers serialise concurrent writers.
func WriteFrame(w io.Writer, t FrameType, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrTooLarge, len(payload), MaxFrame)
	}
	var hdr [5]byte
	hdr[0] = byte(t)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	// One write for small frames keeps yamux from sending two packets.
	if len(payload) <= 4096 {
		buf := make([]byte, 0, 5+len(payload))
		buf = append(append(buf, hdr[:]...), payload...)
		_, err := w.Write(buf)
		return err
	}
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (FrameType, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, n, MaxFrame)
	}
	// The buffer grows with the bytes that arrive: a header claiming
	// MaxFrame with nothing behind it (from a broken or hostile guest)
	// costs what was sent, not 64 MiB per stream.
	buf := bytes.NewBuffer(make([]byte, 0, min(int(n), 64<<10)))
	if m, err := io.CopyN(buf, r, int64(n)); m != int64(n) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return FrameType(hdr[0]), buf.Bytes(), nil
}
