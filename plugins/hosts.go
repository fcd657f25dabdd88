package plugins

import (
	"fmt"
	"net"
	"path"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Allowlist is the set of hosts a plugin's setup and run commands may
// reach (the pluginSetupAllowlist setting): exact names, and "*.name" for
// every subdomain of name.
type Allowlist struct {
	exact    map[string]bool
	suffixes []string
}

// NewAllowlist builds an allowlist from host names.
func NewAllowlist(hosts []string) Allowlist {
	a := Allowlist{exact: map[string]bool{}}
	for _, h := range hosts {
		h = normHost(h)
		if s, ok := strings.CutPrefix(h, "*."); ok {
			a.suffixes = append(a.suffixes, "."+s)
		} else if h != "" {
			a.exact[h] = true
		}
	}
	return a
}

// Allows reports whether host is on the list.
func (a Allowlist) Allows(host string) bool {
	host = normHost(host)
	if a.exact[host] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// HostRef is one host a command mentions.
type HostRef struct {
	Host string
	// Text is the word it was found in, for the message.
	Text string
	// Dynamic means the host is built from a variable or command
	// substitution, so it can't be known before the command runs.
	Dynamic bool
}

// CheckHosts finds every host that setup and each tool's run mention and
// returns a problem for each one outside the allowlist, and for every
// place where the command decides where it connects only at run time
// (DynamicHosts). The static check
// can be evaded (a host assembled at run time from pieces), which is why
// the network policy enforces permissions again while the command runs;
// this check exists to refuse or flag the plain cases up front.
func CheckHosts(p *Plugin, allow Allowlist) []Problem { return checkHosts(p, allow, true) }

// checkHosts is CheckHosts; without runtime it leaves out DynamicHosts,
// for recipes whose network permission is already narrowed for them
// (an agent's, see Restrict), where flagging every script would refuse
// what the policy already confines.
func checkHosts(p *Plugin, allow Allowlist, runtime bool) []Problem {
	var out []Problem
	check := func(field, cmd string) {
		seen := map[string]bool{}
		refs := FindHosts(cmd, p.Files)
		if runtime {
			refs = append(refs, DynamicHosts(cmd)...)
		}
		for _, h := range refs {
			key := h.Host
			if h.Dynamic {
				key = "\x00" + h.Text
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			switch {
			case h.Dynamic:
				out = append(out, Problem{field, fmt.Sprintf("reaches a host built at run time (%q), which can't be checked against the setup allowlist", h.Text),
					"write the host name literally, with no command substitution, connect-to/resolve/proxy option or script in between; if you trust the recipe, accept it knowing only its network permission limits what it reaches"})
			case !allow.Allows(h.Host):
				out = append(out, Problem{field, fmt.Sprintf("reaches %q (in %q), which is not on the setup allowlist", h.Host, h.Text),
					"use an allowlisted host, or add this one to the pluginSetupAllowlist setting"})
			}
		}
	}
	check("setup", p.Setup)
	for i, t := range p.Tools {
		check(fmt.Sprintf("tools[%d].run", i), t.Run)
	}
	return out
}

// fileExtensions are top-level domains that are far more often file
// extensions in a command ("helpers.py", "install.sh"): a bare word ending
// in one is not taken for a host. Written with a scheme, or followed by a
// path or port, it still is.
var fileExtensions = map[string]bool{
	"py": true, "sh": true, "pl": true, "rs": true, "md": true, "so": true, "zip": true,
	"mov": true, "ps": true, "ml": true, "cc": true, "in": true, "ai": true, "gz": true, "bz": true,
	"json": true, "csv": true, "txt": true, "app": true, "sql": true, "jar": true, "rb": true, "php": true,
	"js": true, "ts": true, "go": true, "lua": true, "r": true, "tf": true,
}

var classicTLDs = map[string]bool{
	"com": true, "net": true, "org": true, "edu": true, "gov": true, "mil": true, "int": true,
	"info": true, "biz": true, "dev": true, "cloud": true, "xyz": true, "site": true, "online": true, "tech": true, "top": true,
}

// FindHosts returns every host name, IP address and URL host that a shell
// command mentions: URLs of any scheme, scp-style user@host:path, host:port
// and host/path, and words that are a host name whose last label is a real
// top-level domain. Shell quoting is undone first, so "exa""mple.com" is found, and
// quoted program text (python3 -c "...") is searched too. files are the
// plugin's file paths: a word naming one is not a host.
func FindHosts(cmd string, files map[string]string) []HostRef {
	names := map[string]bool{}
	for f := range files {
		names[strings.ToLower(f)] = true
		names[strings.ToLower(path.Base(f))] = true
	}
	var out []HostRef
	for _, w := range shellWords(cmd) {
		out = append(out, hostsInWord(w, names)...)
	}
	return out
}

// shellWords is every word of cmd in order: the words of each simple
// command (shellCommands, the one tokenizer), quotes and backslashes
// undone, variable references kept verbatim.
func shellWords(cmd string) []string {
	var words []string
	for _, c := range shellCommands(cmd) {
		words = append(words, c...)
	}
	return words
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'
}

// authorityEnd are the characters that end a URL's host part in program
// text as well as in shell words.
const authorityEnd = "/?#\\\"' \t\r\n),;<>|`^"

func hostsInWord(w string, files map[string]bool) []HostRef {
	var out []HostRef
	// URLs of any scheme.
	rest := []byte(w)
	for {
		k := strings.Index(string(rest), "://")
		if k < 0 {
			break
		}
		s := k
		for s > 0 && isSchemeChar(rest[s-1]) {
			s--
		}
		e := k + 3
		for e < len(rest) && strings.IndexByte(authorityEnd, rest[e]) < 0 {
			e++
		}
		scheme := strings.ToLower(string(rest[s:k]))
		auth := string(rest[k+3 : e])
		for i := s; i < e; i++ {
			rest[i] = ' ' // so the bare-name pass below doesn't see it again
		}
		if scheme == "file" || auth == "" && scheme != "" {
			continue
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			auth = auth[at+1:]
		}
		host := auth
		if strings.HasPrefix(host, "[") {
			if j := strings.IndexByte(host, ']'); j > 0 {
				host = host[1:j]
			}
		} else if j := strings.LastIndexByte(host, ':'); j >= 0 {
			host = host[:j] // the port
		}
		out = append(out, HostRef{Host: normHost(host), Text: w, Dynamic: strings.ContainsAny(host, "$`{%")})
	}
	// Bare names: split what's left into tokens of host-ish characters.
	tokens := strings.FieldsFunc(string(rest), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_@:/$", r))
	})
	for _, tok := range tokens {
		t := tok
		strong := false // followed by a path or port: surely a host
		if at := strings.LastIndexByte(t, '@'); at >= 0 {
			t = t[at+1:]
			if !strings.Contains(t, ":") {
				continue // an e-mail address, not a connection
			}
			strong = true // scp-style user@host:path
		}
		if j := strings.IndexAny(t, "/:"); j >= 0 {
			strong = strong || j > 0 && j+1 < len(t) && t[j+1] != '/'
			t = t[:j]
		}
		t = strings.Trim(t, ".-_")
		if t == "" || files[strings.ToLower(t)] {
			continue
		}
		if ip := net.ParseIP(t); ip != nil && strings.Count(t, ".") == 3 {
			out = append(out, HostRef{Host: t, Text: tok})
			continue
		}
		if !IsDomain(t) || strings.Contains(t, "_") {
			continue
		}
		labels := strings.Split(normHost(t), ".")
		tld := labels[len(labels)-1]
		if _, icann := publicsuffix.PublicSuffix(tld); !icann {
			continue // obj.method, module.attr: not a real top-level domain
		}
		// A bare name counts when it is a whole shell word (curl
		// example.com); inside program text (python3 -c "...") a dotted
		// name is far more often obj.attr, so there only URLs and
		// host/path or host:port count. Hosts assembled by a program are
		// the network policy's to stop at run time.
		// Newer generic top-level domains (.email, .show, .data) are
		// mostly config keys and attributes in commands (git config
		// user.email), so a bare word needs a country code or one of the
		// long-standing generic ones.
		if !strong && (tok != w || fileExtensions[tld] || len(tld) != 2 && !classicTLDs[tld]) {
			continue
		}
		out = append(out, HostRef{Host: normHost(t), Text: tok})
	}
	return out
}
