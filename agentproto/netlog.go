package agentproto

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// OpNetLog reads the guest's log of refused connections (protocol 2.3).
// A guest that predates it answers ErrUnsupported ("unknown op").
const OpNetLog = "net_log"

// Who refused a connection.
const (
	RefusedByProxy    = "proxy"    // the egress proxy (domain lists)
	RefusedByFirewall = "firewall" // the guest's nftables rules
)

// Limits of a net_log call.
const (
	MaxNetLogWait    = 30 * time.Second
	MaxNetLogEntries = 1000
)

// NetLogRequest asks for the refusals recorded after the sequence number
// After (0: from the oldest kept). WaitMillis > 0 long-polls: the guest
// answers as soon as there is a newer entry, or empty after that long
// (at most MaxNetLogWait).
type NetLogRequest struct {
	After      uint64 `json:"after,omitempty"`
	WaitMillis int64  `json:"wait_ms,omitempty"`
	Max        int    `json:"max,omitempty"` // default and upper bound MaxNetLogEntries
}

// NetRefusal is one refused connection (or a run of identical ones in a
// row: Count and Last). The guest records it, never the agent: the proxy
// and the kernel's packet log both live where agents have no rights.
type NetRefusal struct {
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`           // the first of the run
	Last  time.Time `json:"last,omitempty"` // the latest of the run, when Count > 1
	Count int       `json:"count"`
	// User is the agent's Linux user ("" when the source matched no agent).
	User string `json:"user"`
	// Plugin is set when the connection came from a plugin's tool or
	// setup, which run under the plugin's narrower policy.
	Plugin string `json:"plugin,omitempty"`
	// Dest is what was asked for: an address (firewall) or the name or
	// address the client gave the proxy.
	Dest   string `json:"dest"`
	Port   int    `json:"port,omitempty"`
	Proto  string `json:"proto,omitempty"` // "tcp", "udp", "icmp", ...
	By     string `json:"by"`              // RefusedByProxy or RefusedByFirewall
	Reason string `json:"reason"`
}

// NetLogResponse carries the entries in sequence order. Next is the After
// of the following call. Dropped counts entries that fell out of the
// guest's bounded log before anyone read them; Warnings say what the guest
// can't record (e.g. a kernel without packet logging).
type NetLogResponse struct {
	Entries  []NetRefusal `json:"entries"`
	Next     uint64       `json:"next"`
	Dropped  uint64       `json:"dropped,omitempty"`
	Warnings []string     `json:"warnings,omitempty"`
}

// NetLogService is implemented by guests that keep the log. It is apart
// from Service so implementations without a network (tests, development
// agents) need not grow a method.
type NetLogService interface {
	NetLog(context.Context, *NetLogRequest) (*NetLogResponse, error)
}

// NetLog reads the refusal log.
func (c *Client) NetLog(ctx context.Context, req NetLogRequest) (NetLogResponse, error) {
	var resp NetLogResponse
	err := c.Peer.Call(ctx, OpNetLog, req, &resp)
	return resp, err
}

// FormatRefusal is a refusal as one line for people (the CLI's log and
// the window's): local time, agent, destination:port/protocol, who
// refused it and why. agent is the agent's name, "" if unknown.
func FormatRefusal(e NetRefusal, agent string) string {
	who := agent
	switch {
	case who == "" && e.User != "":
		who = e.User
	case who == "":
		who = "(unknown source)"
	}
	if e.Plugin != "" {
		who += " (" + e.Plugin + ")"
	}
	dest := e.Dest
	if e.Port != 0 {
		if strings.Contains(dest, ":") {
			dest = "[" + dest + "]"
		}
		dest = fmt.Sprintf("%s:%d", dest, e.Port)
	}
	if e.Proto != "" {
		dest += "/" + e.Proto
	}
	times := ""
	if e.Count > 1 {
		times = fmt.Sprintf(" (%d times, last %s)", e.Count, e.Last.Local().Format(time.TimeOnly))
	}
	return fmt.Sprintf("%s  %-16s %-28s %-8s %s%s", e.Time.Local().Format(time.DateTime), who, dest, e.By, e.Reason, times)
}
