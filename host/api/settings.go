package api

import (
	"context"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
)

// SettingsOps read and write the owner's sandbox.json: a front end on
// another machine (a remote context's `config`, its window) has no file
// of its own to read, and the owner is the one that writes it for them.
type SettingsOps interface {
	// Settings is sandbox.json as `config get` reads it, with the
	// Revision a SaveSettings is based on.
	Settings(ctx context.Context) (SettingsFile, error)
	// SaveSettings validates and writes req, atomically; when the file
	// is no longer at req.IfRevision it writes nothing and fails with
	// config.ErrChanged (over the socket, its class agentproto.ErrBusy).
	SaveSettings(ctx context.Context, req SettingsSave) (SettingsFile, error)
}

// SettingsFile is the owner's sandbox.json.
type SettingsFile struct {
	// Path is the file on the owner's machine, for messages.
	Path string `json:"path"`
	// Settings are the good settings; each bad entry keeps its default
	// and is in Problems.
	Settings config.Sandbox    `json:"settings"`
	Problems []SettingsProblem `json:"problems,omitempty"`
	// Damaged says why the file is not JSON and how to fix it; Settings
	// are the defaults until then.
	Damaged string `json:"damaged,omitempty"`
	// Revision is the SHA-256 of the file, "" when there is none.
	Revision string `json:"revision"`
	// Aside is where a SaveSettings with Aside moved the old file.
	Aside string `json:"aside,omitempty"`
}

// SettingsProblem is one bad entry of the file (config.Problem).
type SettingsProblem struct {
	Key   string `json:"key"`
	Line  int    `json:"line"`
	Error string `json:"error"`
	// Text is the problem with its fix, as `config` prints it.
	Text string `json:"text"`
}

// SettingsSave is a change to the owner's sandbox.json (config.Changes):
// each setting of Settings that differs from the file's is written, the
// rest of the file is kept as written.
type SettingsSave struct {
	Settings config.Sandbox `json:"settings"`
	// Reset are keys removed from the file first (back to the default;
	// an unknown key dropped).
	Reset []string `json:"reset,omitempty"`
	// Aside moves the file aside first (to sandbox.json.bak-TIME or
	// .damaged-TIME): every setting not in Settings is at its default.
	Aside bool `json:"aside,omitempty"`
	// IfRevision is the Revision of the SettingsFile the change is based
	// on ("" for no file).
	IfRevision string `json:"ifRevision"`
}

// Preview is a port an agent exposed (sandbox_expose_port), relayed on
// the owner's loopback at URL.
type Preview struct {
	Agent    string    `json:"agent"` // slug
	Port     int       `json:"port"`  // in the agent's network namespace
	HostPort int       `json:"hostPort"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
}
