package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Limits of the secret tools.
const (
	MaxSecretBytes       = 64 << 10 // sandbox_secret_set value
	MaxSecretDescription = 500      // characters
)

const serviceSecrets = "secrets"

// SecretStore is the agents' keychain (secrets.Store). The tools check
// and store; they never hand a value back to the model.
type SecretStore interface {
	Get(agent, key string) (string, error) // secrets.ErrNotFound when absent
	Set(agent, key, value string) error
}

// contextSecrets is a SecretStore whose calls end with the tool call's
// ctx (secrets.Store: with secretStore client each is a request to the
// user's machine, which a cancelled call need not wait for).
type contextSecrets interface {
	GetContext(ctx context.Context, agent, key string) (string, error)
	SetContext(ctx context.Context, agent, key, value string) error
}

func secretGet(ctx context.Context, st SecretStore, agent, key string) (string, error) {
	if cs, ok := st.(contextSecrets); ok {
		return cs.GetContext(ctx, agent, key)
	}
	return st.Get(agent, key)
}

func secretPut(ctx context.Context, st SecretStore, agent, key, value string) error {
	if cs, ok := st.(contextSecrets); ok {
		return cs.SetContext(ctx, agent, key, value)
	}
	return st.Set(agent, key, value)
}

// SecretRequest is a prompt for one secret of one agent.
type SecretRequest struct {
	Agent       agents.Agent
	Key         string
	Description string // the model's words: show them as such
}

// SecretPrompter asks the user for a secret's value and stores it, so the
// value never passes through the tool call. It returns nil once the value
// is stored, an error wrapping ErrSecretDenied when the user declined or
// did not answer in time, and a NoPromptError when nothing can reach the
// user.
type SecretPrompter interface {
	PromptSecret(ctx context.Context, req SecretRequest) error
}

// ErrSecretDenied: the user declined to enter a secret.
var ErrSecretDenied = agentproto.Class(agentproto.ErrPermission, "the user declined to enter the secret")

// NoPromptError: no channel (MCP client, window) can reach the user.
type NoPromptError struct{ Agent, Key string }

func (e *NoPromptError) Error() string {
	return fmt.Sprintf("there is no way to ask the user for %s from here (the MCP client can't open a link and the Osaurus Sandbox window is not open). "+
		"Ask the user to run `osaurus-sandbox secret set %s %s` in a terminal, then check with sandbox_secret_check", e.Key, e.Agent, e.Key)
}

// URLElicitor is an MCP client session that can send its user to a URL
// (URL-mode elicitation). The MCP server puts it in the call's context
// when the client declares the capability.
type URLElicitor interface {
	// ElicitURL asks the client to open url; it returns the user's
	// action: accept, decline or cancel.
	ElicitURL(ctx context.Context, id, url, message string) (action string, err error)
	// ElicitationComplete tells the client the interaction id finished.
	ElicitationComplete(ctx context.Context, id string)
}

type elicitorKey struct{}

// WithURLElicitor returns ctx carrying e.
func WithURLElicitor(ctx context.Context, e URLElicitor) context.Context {
	return context.WithValue(ctx, elicitorKey{}, e)
}

// URLElicitorFrom returns the URL elicitor of ctx, or nil.
func URLElicitorFrom(ctx context.Context) URLElicitor {
	e, _ := ctx.Value(elicitorKey{}).(URLElicitor)
	return e
}

type secretCheckArgs struct {
	Key string `json:"key"`
}

type secretSetArgs struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	Description string  `json:"description"`
}

// chargeSecrets counts a secret call against the agent's rate limit; these tools
// need no VM, so they skip admit.
func (c *call) chargeSecrets() error {
	if c.env.secretStore == nil {
		return envelope.Errorf(envelope.Unavailable, "this server has no secret store")
	}
	return c.env.rate.Allow(c.agent.ID, serviceSecrets)
}

func checkSecretKey(key string) error {
	if err := secrets.CheckKey(key); err != nil {
		return envelope.ArgErrorf("key", "an environment variable name such as OPENAI_API_KEY",
			"argument `key` %q is not a valid secret name: use letters, digits and '_' (not starting with a digit), at most 128", key)
	}
	return nil
}

func keychainError(err error) error {
	if errors.Is(err, secrets.ErrUnavailable) {
		return envelope.Errorf(envelope.Unavailable, "%v", err)
	}
	return err
}

func secretCheck(ctx context.Context, c *call, a secretCheckArgs) (any, error) {
	if err := checkSecretKey(a.Key); err != nil {
		return nil, err
	}
	if err := c.chargeSecrets(); err != nil {
		return nil, err
	}
	_, err := secretGet(ctx, c.env.secretStore, c.agent.Slug, a.Key)
	switch {
	case errors.Is(err, secrets.ErrNotFound):
		return map[string]any{"exists": false}, nil
	case err != nil:
		return nil, keychainError(err)
	}
	return map[string]any{"exists": true}, nil
}

func secretSet(ctx context.Context, c *call, a secretSetArgs) (any, error) {
	if err := checkSecretKey(a.Key); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(a.Description); n > MaxSecretDescription {
		return nil, envelope.ArgErrorf("description", fmt.Sprintf("at most %d characters", MaxSecretDescription),
			"argument `description` has %d characters; keep it under %d", n, MaxSecretDescription)
	}
	if a.Value != nil {
		switch v := *a.Value; {
		case v == "":
			return nil, envelope.ArgErrorf("value", "a non-empty string, or no value to ask the user",
				"argument `value` is empty; omit it to ask the user for %s", a.Key)
		case len(v) > MaxSecretBytes:
			return nil, envelope.ArgErrorf("value", fmt.Sprintf("at most %d bytes", MaxSecretBytes),
				"argument `value` has %d bytes; secrets are limited to %d", len(v), MaxSecretBytes)
		}
	}
	if err := c.chargeSecrets(); err != nil {
		return nil, err
	}
	if a.Value != nil {
		if err := secretPut(ctx, c.env.secretStore, c.agent.Slug, a.Key, *a.Value); err != nil {
			return nil, keychainError(err)
		}
		return map[string]any{"stored": true, "key": a.Key}, nil
	}
	if c.env.prompter == nil {
		return nil, envelope.Errorf(envelope.UserDenied, "%v", &NoPromptError{Agent: c.agent.Slug, Key: a.Key})
	}
	err := c.env.prompter.PromptSecret(ctx, SecretRequest{Agent: c.agent, Key: a.Key, Description: a.Description})
	var np *NoPromptError
	switch {
	case err == nil:
		return map[string]any{"stored": true, "key": a.Key}, nil
	case errors.Is(err, ErrSecretDenied), errors.As(err, &np):
		return nil, envelope.Errorf(envelope.UserDenied, "%v", err)
	}
	return nil, keychainError(err)
}

// IsSecretTool says whether name is one of the secret tools, which need
// the caller's MCP session (to ask the user) rather than the guest.
func IsSecretTool(name string) bool {
	return name == "sandbox_secret_check" || name == "sandbox_secret_set"
}

// StoreSecrets gives plugins their secrets from the agents' keychain: a
// plugin's declared secret NAME is the agent's secret NAME, the one
// `osaurus-sandbox secret set AGENT NAME`, sandbox_secret_set and the
// window store. So one value serves the agent's own commands (through
// `osaurus-host secrets get`) and every plugin of that agent declaring it,
// and a plugin's commands get only the names it declares, never the
// agent's other secrets nor another agent's.
type StoreSecrets struct{ Store SecretStore }

// PluginSecrets returns the values of names for agent (its slug). Every
// absent one is listed in a *MissingSecretsError; a keychain that can't
// be reached is an unavailable error.
func (s StoreSecrets) PluginSecrets(_ context.Context, agent, pluginID string, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		v, err := s.Store.Get(agent, n)
		switch {
		case errors.Is(err, secrets.ErrNotFound):
			missing = append(missing, n)
		case err != nil:
			return nil, keychainError(err)
		default:
			out[n] = v
		}
	}
	if len(missing) > 0 {
		return nil, &MissingSecretsError{Agent: agent, Plugin: pluginID, Names: missing}
	}
	return out, nil
}

// MissingSecretsError: an agent has no value for secrets a plugin
// declares. Its message names each one and the command that sets it.
type MissingSecretsError struct {
	Agent, Plugin string
	Names         []string
}

func (e *MissingSecretsError) Error() string {
	cmds := make([]string, len(e.Names))
	for i, n := range e.Names {
		cmds[i] = fmt.Sprintf("`osaurus-sandbox secret set %s %s`", e.Agent, n)
	}
	what := "the secret " + e.Names[0]
	if len(e.Names) > 1 {
		what = "the secrets " + strings.Join(e.Names, ", ")
	}
	return fmt.Sprintf("the plugin %s needs %s, which agent %s does not have: set it with %s (the value is typed at the prompt or read from stdin), "+
		"or let the agent store it with sandbox_secret_set, then install again", e.Plugin, what, e.Agent, strings.Join(cmds, " and "))
}
