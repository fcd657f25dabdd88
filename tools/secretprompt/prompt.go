// Package secretprompt asks the user for an agent's secret when the model calls
// sandbox_secret_set without a value, through every channel that can reach
// the user at once: the MCP client (URL-mode elicitation pointing at a
// one-time page served here on loopback) and the app's window (a password
// dialog). The first answer wins and the others are withdrawn. The value
// goes from the user straight into the keychain: it never passes through
// the MCP client or the tool result.
package secretprompt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/tools"
)

// DefaultTimeout bounds how long a call waits for the user.
const DefaultTimeout = 5 * time.Minute

// Store is where answers go (secrets.Store).
type Store interface {
	Set(agent, key, value string) error
}

// Dialog shows the window's password dialog for req until the user
// answers or ctx ends. ok is false when the user declined.
type Dialog func(ctx context.Context, req tools.SecretRequest) (value string, ok bool)

// Broker is a tools.SecretPrompter.
type Broker struct {
	Store Store
	// Pages serves the one-time pages of URL elicitations; nil turns that
	// channel off.
	Pages *Pages
	// Timeout defaults to DefaultTimeout.
	Timeout time.Duration

	mu     sync.Mutex
	dialog Dialog
}

// SetDialog makes d the window's channel until the returned function is
// called (the window closed).
func (b *Broker) SetDialog(d Dialog) (unset func()) {
	b.mu.Lock()
	b.dialog = d
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.dialog = nil
		b.mu.Unlock()
	}
}

// outcome is one channel's answer; dead means the channel could not ask.
type outcome struct {
	err  error
	dead bool
}

// PromptSecret implements tools.SecretPrompter.
func (b *Broker) PromptSecret(ctx context.Context, req tools.SecretRequest) error {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	results := make(chan outcome, 3)
	channels := 0

	if el := tools.URLElicitorFrom(ctx); el != nil && b.Pages != nil {
		pg, err := b.Pages.Open(req, timeout)
		if err == nil {
			defer pg.Close()
			channels++
			// The elicitation id is not the page's: the URL is the only
			// capability for the page, and the id travels on its own.
			id := randomToken()
			go func() {
				select {
				case err := <-pg.Done:
					results <- outcome{err: err}
				case <-ctx.Done():
				}
			}()
			go func() {
				msg := fmt.Sprintf("Agent %s asks for the secret %s. Open the link to type it into Osaurus Sandbox on this computer; "+
					"the value goes to the OS keychain and is not shown to the agent.", req.Agent.Name, req.Key)
				action, err := el.ElicitURL(ctx, id, pg.URL, msg)
				switch {
				case err != nil:
					// The client could not ask: this channel is out,
					// the others (the window) may still answer.
					results <- outcome{dead: true}
				case action != "accept":
					results <- outcome{err: fmt.Errorf("%w (%s in the MCP client)", tools.ErrSecretDenied, action)}
				}
			}()
			defer func() { el.ElicitationComplete(context.WithoutCancel(ctx), id) }()
		}
	}
	b.mu.Lock()
	d := b.dialog
	b.mu.Unlock()
	if d != nil {
		channels++
		go func() {
			v, ok := d(ctx, req)
			switch {
			case ctx.Err() != nil:
			case !ok:
				results <- outcome{err: fmt.Errorf("%w (in the Osaurus Sandbox window)", tools.ErrSecretDenied)}
			default:
				results <- outcome{err: b.Store.Set(req.Agent.Slug, req.Key, v)}
			}
		}()
	}
	for channels > 0 {
		select {
		case o := <-results:
			if o.dead {
				channels--
				continue
			}
			return o.err
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: no answer within %s", tools.ErrSecretDenied, timeout)
			}
			return ctx.Err()
		}
	}
	return &tools.NoPromptError{Agent: req.Agent.Slug, Key: req.Key}
}
