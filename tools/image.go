package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// MaxImageBytes bounds an image sandbox_read_file returns as image
// content.
const MaxImageBytes = 1 << 20

// imageTypes are the extensions sandbox_read_file returns as images, with
// the MIME type their bytes must also sniff as.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}

// ImageResult is sandbox_read_file's result for an image: Data is the
// file, base64. The MCP server turns it into image content.
type ImageResult struct {
	Kind     string `json:"kind"` // "image"
	Path     string `json:"path"`
	MIMEType string `json:"mime_type"`
	Size     int64  `json:"size"`
	Data     string `json:"data,omitempty"`
}

// readImage reads p as an image of type mime. A file whose bytes are not
// that image gives nil, nil: it is read as text.
func (c *call) readImage(ctx context.Context, p sandboxpath.Resolved, mime string) (any, error) {
	r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: c.as(p.Root), Path: p.Path, MaxBytes: MaxImageBytes})
	if errors.Is(err, agentproto.ErrIsDir) {
		return nil, envelope.ArgErrorf("path", "a file", "%s is a directory; list it with sandbox_list_directory", p.Path)
	}
	if err != nil {
		return nil, err
	}
	if http.DetectContentType(r.Data) != mime {
		return nil, nil
	}
	if r.Truncated || r.Size > MaxImageBytes {
		return nil, envelope.ArgErrorf("path", fmt.Sprintf("an image of at most %d bytes", MaxImageBytes),
			"%s is an image of %d bytes, over the %d-byte limit; make a smaller copy (e.g. with ImageMagick in sandbox_exec) and read that", p.Path, r.Size, MaxImageBytes)
	}
	return ImageResult{Kind: "image", Path: p.Path, MIMEType: mime, Size: r.Size, Data: base64.StdEncoding.EncodeToString(r.Data)}, nil
}
