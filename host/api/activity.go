package api

import (
	"encoding/json"
	"errors"
	"os"
	"time"
)

// AgentActivity is an agent's last tool call as the owner saw it.
type AgentActivity struct {
	LastCall time.Time `json:"lastCall"`
	Tool     string    `json:"tool"`
	// Via is "http" (the app's MCP server) or "stdio" (`osaurus-sandbox
	// mcp`, and the CLI's tasks, through the control socket).
	Via string `json:"via"`
}

// ReadActivity reads the owner's activity file (config.Paths.AgentActivity),
// by agent id; no file is no activity yet.
func ReadActivity(path string) (map[string]AgentActivity, error) {
	out := map[string]AgentActivity{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}
