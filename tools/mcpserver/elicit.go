package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/tools"
)

// sessionElicitor sends a client to a URL (MCP URL-mode elicitation), for
// sandbox_secret_set's prompt.
type sessionElicitor struct{ ss *mcp.ServerSession }

// urlElicitor returns the session's elicitor when its client declared
// URL-mode elicitation, else nil.
func urlElicitor(ss *mcp.ServerSession) tools.URLElicitor {
	if ss == nil {
		return nil
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil || p.Capabilities.Elicitation.URL == nil {
		return nil
	}
	return sessionElicitor{ss}
}

func (e sessionElicitor) ElicitURL(ctx context.Context, id, url, message string) (string, error) {
	res, err := e.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: message, URL: url, ElicitationID: id})
	if err != nil {
		return "", err
	}
	return res.Action, nil
}

func (e sessionElicitor) ElicitationComplete(ctx context.Context, id string) {
	// Best effort: the client may have gone; the call's result says the rest.
	_ = e.ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
}
