package agentproto

import (
	"context"
	"fmt"
)

// File bodies travel as raw Data frames, not inside JSON: base64 costs a
// third more bytes and, worse, a slow decode on an emulated guest CPU.

const dataChunk = 1 << 20

func writeData(s *stream, data []byte) error {
	for off := 0; off < len(data); off += dataChunk {
		if err := s.writeFrame(FrameData, data[off:min(off+dataChunk, len(data))]); err != nil {
			return err
		}
	}
	return s.writeFrame(FrameDataEnd, nil)
}

// readData collects Data frames up to DataEnd, refusing more than limit.
func readData(s *stream, limit int) ([]byte, error) {
	var data []byte
	for {
		t, payload, err := ReadFrame(s)
		if err != nil {
			return nil, err
		}
		switch t {
		case FrameData:
			if len(data)+len(payload) > limit {
				return nil, fmt.Errorf("%w: file body over %d bytes", ErrTooLarge, limit)
			}
			data = append(data, payload...)
		case FrameDataEnd:
			return data, nil
		default:
			return nil, fmt.Errorf("%w: unexpected frame %q in a file body", ErrProtocol, t)
		}
	}
}

// maxFileBody bounds one read_file or write_file body.
const maxFileBody = MaxFrame / 2

func writeFileHandler(f func(context.Context, *WriteFileRequest) (*WriteFileResponse, error)) HandlerFunc {
	return func(ctx context.Context, c *Call) error {
		var req WriteFileRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		data, err := readData(c.s, maxFileBody)
		if err != nil {
			return err
		}
		req.Data = data
		resp, err := f(ctx, &req)
		if err != nil {
			return err
		}
		return c.Respond(resp)
	}
}

func readFileHandler(f func(context.Context, *ReadFileRequest) (*ReadFileResponse, error)) HandlerFunc {
	return func(ctx context.Context, c *Call) error {
		var req ReadFileRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		resp, err := f(ctx, &req)
		if err != nil {
			return err
		}
		if err := c.Respond(resp); err != nil {
			return err
		}
		if err := writeData(c.s, resp.Data); err != nil {
			return err
		}
		return errResponded
	}
}

// ReadFile reads (part of) a file.
func (c *Client) ReadFile(ctx context.Context, req ReadFileRequest) (ReadFileResponse, error) {
	var resp ReadFileResponse
	s, release, err := c.Peer.open(ctx, OpReadFile, req)
	if err != nil {
		return resp, err
	}
	defer release()
	t, payload, err := ReadFrame(s)
	if err != nil {
		return resp, c.Peer.callErr(ctx, OpReadFile, err)
	}
	if t != FrameResponse {
		return resp, fmt.Errorf("agent read_file: %w: unexpected frame %q", ErrProtocol, t)
	}
	if err := decodeResponse(OpReadFile, payload, &resp); err != nil {
		return resp, err
	}
	if resp.Data, err = readData(s, maxFileBody); err != nil {
		return resp, c.Peer.callErr(ctx, OpReadFile, err)
	}
	return resp, nil
}

// WriteFile writes a file atomically (or appends).
func (c *Client) WriteFile(ctx context.Context, req WriteFileRequest) (WriteFileResponse, error) {
	var resp WriteFileResponse
	if len(req.Data) > maxFileBody {
		return resp, fmt.Errorf("agent write_file: %w: %d bytes, at most %d per call", ErrTooLarge, len(req.Data), maxFileBody)
	}
	s, release, err := c.Peer.open(ctx, OpWriteFile, req)
	if err != nil {
		return resp, err
	}
	defer release()
	if err := writeData(s, req.Data); err != nil {
		return resp, c.Peer.callErr(ctx, OpWriteFile, err)
	}
	t, payload, err := ReadFrame(s)
	if err != nil {
		return resp, c.Peer.callErr(ctx, OpWriteFile, err)
	}
	if t != FrameResponse {
		return resp, fmt.Errorf("agent write_file: %w: unexpected frame %q", ErrProtocol, t)
	}
	return resp, decodeResponse(OpWriteFile, payload, &resp)
}
