package plugins

import (
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// Confined reports whether a recipe from origin o runs under the setup
// allowlist when it asks for no network: every recipe fetched from
// outside (a file, a URL, GitHub) and copies of one. A recipe written in
// the editor is the user's own and keeps "no permission: the agent's
// policy"; an agent's has its permission set by Restrict.
func Confined(o Origin) bool {
	switch o.Kind {
	case OriginFile, OriginURL, OriginGitHub, OriginDuplicate:
		return true
	}
	return false
}

// Confine returns the recipe to install from origin o: for a Confined
// origin without permissions.network, a copy whose permission is the
// setup allowlist as a domain list (an allowlist that is not a valid
// list is "none": fail closed), so its setup and tools never get the
// agent's own outbound network; otherwise p itself.
func Confine(p *Plugin, o Origin, allowlist []string) *Plugin {
	if !Confined(o) || p.Permissions != nil && strings.TrimSpace(p.Permissions.Network) != "" {
		return p
	}
	q := p.Clone()
	perm := Permissions{Network: netpolicy.SettingNone}
	if q.Permissions != nil {
		perm = *q.Permissions
	}
	perm.Network = netpolicy.SettingNone
	if pol, err := netpolicy.Parse("pluginSetupAllowlist", strings.Join(allowlist, ",")); err == nil && pol.Mode == netpolicy.Domains {
		perm.Network = pol.String()
	}
	q.Permissions = &perm
	return q
}

// Grant is what installing a recipe hands it, for the review an import
// and an install show before they go ahead.
type Grant struct {
	// Secrets are the agent's secrets its setup and tools receive.
	Secrets []string
	// Network is what its setup and tools may reach (narrowed by the
	// agent's own policy when Agent is set).
	Network netpolicy.Policy
	// Allowlisted: the recipe asked for no network and gets the setup
	// allowlist.
	Allowlisted bool
	// Wider: the recipe asks for more than the setup allowlist (outbound,
	// or names outside it).
	Wider bool
	// Flags are what its commands reach outside the allowlist or decide
	// at run time (CheckHosts).
	Flags []Problem
}

// Review is the grant of p from origin o under the setup allowlist; agent,
// when set, is the policy of the agent it is installed for.
func Review(p *Plugin, o Origin, allowlist []string, agent *netpolicy.Policy) Grant {
	c := Confine(p, o, allowlist)
	g := Grant{Secrets: append([]string(nil), p.Secrets...), Network: c.NetworkPolicy(), Allowlisted: c != p}
	allow, err := netpolicy.Parse("pluginSetupAllowlist", strings.Join(allowlist, ","))
	if err != nil {
		allow = netpolicy.Policy{Mode: netpolicy.None}
	}
	switch g.Network.Mode {
	case netpolicy.Outbound:
		g.Wider = true
	case netpolicy.Domains:
		g.Wider = netpolicy.Narrow(g.Network, allow).String() != g.Network.String()
	}
	g.Flags = CheckHosts(p, NewAllowlist(allowlist))
	if agent != nil {
		g.Network = netpolicy.Narrow(*agent, g.Network)
	}
	return g
}

// NeedsConsent reports whether the user must accept the grant before the
// recipe is saved or installed: it receives secrets, may reach more
// than the setup allowlist, or its commands reach hosts outside it or
// decide at run time where they connect.
func (g Grant) NeedsConsent() bool {
	return len(g.Secrets) > 0 || g.Wider || len(g.Flags) > 0
}

// Lines describes the grant for people, one line each: the secrets, the
// network, then each flag.
func (g Grant) Lines() []string {
	sec := "secrets: none"
	if len(g.Secrets) > 0 {
		sec = "secrets: " + strings.Join(g.Secrets, ", ") + " (the agent's values, in its setup's and tools' environment)"
	}
	net := "network: " + g.Network.Describe()
	switch {
	case g.Allowlisted:
		net += " (it asks for no network permission, so it gets the setup allowlist)"
	case g.Wider:
		net += " (more than the setup allowlist)"
	}
	out := []string{sec, net}
	for _, f := range g.Flags {
		out = append(out, fmt.Sprintf("%s: %s", f.Field, f.Message))
	}
	return out
}
