// Package netpolicy is the network policy of an agent (and of a plugin,
// which can only narrow its agent's): what the setting may say, how it is
// checked, and which destinations no policy ever reaches.
//
// A policy is one of
//
//	none      no network at all
//	outbound  the public internet, minus the ranges in Denied
//	a list    only the named domains, over HTTP and HTTPS through the
//	          guest's egress proxy; "*.example.com" names every subdomain
//	          of example.com (not example.com itself)
//
// The same parser and checker serve the host (settings, the CLI, the
// window) and the guest agent (the proxy), so the two never disagree about
// what a setting means.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// Mode is the kind of policy.
type Mode int

const (
	// None: no network. The zero Policy is None, so a forgotten policy
	// fails closed.
	None Mode = iota
	// Outbound: the public internet.
	Outbound
	// Domains: only the listed names, through the proxy.
	Domains
)

// Policy is a parsed network setting. Build one with Parse, Narrow or
// the helpers; Domains is sorted and free of duplicates.
type Policy struct {
	Mode    Mode
	Domains []string
}

// The literal settings.
const (
	SettingNone     = "none"
	SettingOutbound = "outbound"
)

// Limits of a domain list.
const (
	MaxDomains   = 64
	maxNameLen   = 253
	maxLabelLen  = 63
	wildcardHead = "*."
)

// ErrInvalid is the sentinel of every parse failure.
var ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid network setting")

// Error is a setting that does not parse. Its message names the field,
// the offending entry, why, and what to write instead.
type Error struct {
	Field  string // e.g. "network", "permissions.network"
	Entry  string // the offending entry (or the whole setting)
	Reason string
}

// Want describes the valid settings, for error messages and help text.
const Want = `none, outbound, or a comma-separated list of domains such as "example.com,*.example.com"`

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %q %s; want %s", e.Field, e.Entry, e.Reason, Want)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid || errors.Is(ErrInvalid, target) }

// Parse reads a setting. field names the setting in errors. Case and
// spaces around entries don't matter; a trailing dot on a name is dropped.
func Parse(field, s string) (Policy, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case SettingNone:
		return Policy{Mode: None}, nil
	case SettingOutbound:
		return Policy{Mode: Outbound}, nil
	case "":
		return Policy{}, &Error{Field: field, Entry: s, Reason: "is empty"}
	}
	var names []string
	for entry := range strings.SplitSeq(t, ",") {
		name := strings.TrimSuffix(strings.TrimSpace(entry), ".")
		if name == "" {
			return Policy{}, &Error{Field: field, Entry: s, Reason: "has an empty entry"}
		}
		if name == SettingNone || name == SettingOutbound {
			return Policy{}, &Error{Field: field, Entry: name, Reason: "can't be combined with domains"}
		}
		if reason := checkDomain(name); reason != "" {
			return Policy{}, &Error{Field: field, Entry: strings.TrimSpace(entry), Reason: reason}
		}
		names = append(names, name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > MaxDomains {
		return Policy{}, &Error{Field: field, Entry: fmt.Sprintf("%d domains", len(names)),
			Reason: fmt.Sprintf("are more than %d", MaxDomains)}
	}
	return Policy{Mode: Domains, Domains: names}, nil
}

// checkDomain returns why name (lower case) is not a domain entry, or "".
func checkDomain(name string) string {
	host := strings.TrimPrefix(name, wildcardHead)
	if strings.Contains(host, "*") {
		return `has a "*" that is not the whole first label ("*.example.com" is the only wildcard form)`
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return "is an IP address; list domain names (addresses are never allowed by a domain list)"
	}
	if strings.ContainsAny(host, ":/@?#") {
		return "is not a bare domain name (no scheme, port, path or user)"
	}
	if len(host) > maxNameLen {
		return fmt.Sprintf("is longer than %d characters", maxNameLen)
	}
	labels := strings.Split(host, ".")
	if len(labels) < 2 {
		return "is not a fully qualified name (it needs a dot, e.g. example.com)"
	}
	for _, l := range labels {
		if l == "" || len(l) > maxLabelLen {
			return fmt.Sprintf("has an empty label or one longer than %d characters", maxLabelLen)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return `has a label starting or ending with "-"`
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c >= 0x80 {
					return "has non-ASCII characters; write internationalized names in their xn-- form"
				}
				return fmt.Sprintf("has the character %q; names use a-z, 0-9, - and _", c)
			}
		}
	}
	tld := labels[len(labels)-1]
	if strings.Trim(tld, "0123456789") == "" {
		return "ends in a numeric label, which no domain does"
	}
	return ""
}

// MustParse is Parse for constants; it panics on a bad setting.
func MustParse(s string) Policy {
	p, err := Parse("network", s)
	if err != nil {
		panic(err)
	}
	return p
}

// String is the canonical setting: "none", "outbound" or the sorted list.
func (p Policy) String() string {
	switch p.Mode {
	case Outbound:
		return SettingOutbound
	case Domains:
		if len(p.Domains) == 0 {
			return SettingNone
		}
		return strings.Join(p.Domains, ",")
	}
	return SettingNone
}

// Describe is the policy for people.
func (p Policy) Describe() string {
	switch p.Mode {
	case Outbound:
		return "outbound: the public internet (never the host, the VM's other agents, private, link-local, carrier-grade NAT or metadata addresses)"
	case Domains:
		if len(p.Domains) > 0 {
			return "only " + strings.Join(p.Domains, ", ") + " over HTTP and HTTPS, through the sandbox's proxy"
		}
	}
	return "none: no network"
}

// AllowsName reports whether a connection to host (a name the client asked
// the proxy for) is within the policy. An IP literal is never allowed by a
// domain list: it would skip the name check.
func (p Policy) AllowsName(host string) bool {
	switch p.Mode {
	case Outbound:
		return true
	case Domains:
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		if name == "" || checkDomain(name) != "" || strings.HasPrefix(name, wildcardHead) {
			return false
		}
		return slices.ContainsFunc(p.Domains, func(e string) bool { return covers(e, name) })
	}
	return false
}

// covers reports whether entry e admits every name entry x admits.
func covers(e, x string) bool {
	if e == x {
		return true
	}
	base, ok := strings.CutPrefix(e, wildcardHead)
	if !ok {
		return false // an exact name covers only itself
	}
	// "*.example.com" covers "a.example.com" and "*.a.example.com".
	return strings.HasSuffix(strings.TrimPrefix(x, wildcardHead), "."+base)
}

// Narrow is what is allowed under both a and b: an agent's policy
// narrowed by a plugin's permissions.network (or the other way round; it
// is symmetric). none wins over everything; outbound is neutral; two
// lists keep the entries one list allows that the other also allows.
// An empty intersection is None.
func Narrow(a, b Policy) Policy {
	switch {
	case a.Mode == None || b.Mode == None:
		return Policy{Mode: None}
	case a.Mode == Outbound:
		return b.clone()
	case b.Mode == Outbound:
		return a.clone()
	}
	var out []string
	for _, x := range a.Domains {
		if slices.ContainsFunc(b.Domains, func(e string) bool { return covers(e, x) }) {
			out = append(out, x)
		}
	}
	for _, x := range b.Domains {
		if slices.ContainsFunc(a.Domains, func(e string) bool { return covers(e, x) }) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// A name kept next to a wildcard that covers it adds nothing.
	out = slices.DeleteFunc(out, func(x string) bool {
		return slices.ContainsFunc(out, func(e string) bool { return e != x && covers(e, x) })
	})
	if len(out) == 0 {
		return Policy{Mode: None}
	}
	return Policy{Mode: Domains, Domains: out}
}

// NarrowSettings parses both settings with the same checker and narrows.
// The fields name them in errors (e.g. "network", "permissions.network").
func NarrowSettings(agentField, agent, pluginField, plugin string) (Policy, error) {
	a, err := Parse(agentField, agent)
	if err != nil {
		return Policy{}, err
	}
	b, err := Parse(pluginField, plugin)
	if err != nil {
		return Policy{}, err
	}
	return Narrow(a, b), nil
}

func (p Policy) clone() Policy {
	return Policy{Mode: p.Mode, Domains: slices.Clone(p.Domains)}
}

// Migrate turns the old boolean setting into a policy setting: true was
// "the network", now outbound; false was none.
func Migrate(old bool) string {
	if old {
		return SettingOutbound
	}
	return SettingNone
}
