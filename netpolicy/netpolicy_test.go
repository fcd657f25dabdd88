package netpolicy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, want string
		mode     Mode
	}{
		{"none", "none", None},
		{" Outbound ", "outbound", Outbound},
		{"example.com", "example.com", Domains},
		{"b.example.com, A.example.com., *.example.org", "*.example.org,a.example.com,b.example.com", Domains},
		{"example.com,example.com", "example.com", Domains},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", Domains},
		{"_dmarc.example.com", "_dmarc.example.com", Domains},
	}
	for _, tc := range tests {
		p, err := Parse("network", tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if p.Mode != tc.mode || p.String() != tc.want {
			t.Errorf("Parse(%q) = %v %q, want %v %q", tc.in, p.Mode, p.String(), tc.mode, tc.want)
		}
		if again, err := Parse("network", p.String()); err != nil || again.String() != p.String() {
			t.Errorf("Parse(String()) of %q = %q, %v", tc.in, again.String(), err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ in, entry, reason string }{
		{"", "", "is empty"},
		{"true", "true", "fully qualified"},
		{"localhost", "localhost", "fully qualified"},
		{"10.0.2.2", "10.0.2.2", "IP address"},
		{"[::1]", "[::1]", "IP address"},
		{"1.2.3.4.5", "1.2.3.4.5", "numeric"},
		{"https://example.com", "https://example.com", "bare domain"},
		{"example.com:443", "example.com:443", "bare domain"},
		{"*.*.example.com", "*.*.example.com", `"*"`},
		{"a*.example.com", "a*.example.com", `"*"`},
		{"*", "*", `"*"`},
		{"example.com,,x.org", "example.com,,x.org", "empty entry"},
		{"none,example.com", "none", "combined"},
		{"bücher.example", "bücher.example", "xn--"},
		{"-a.example.com", "-a.example.com", `"-"`},
		{"a b.com", "a b.com", "character"},
		{strings.Repeat("a", 64) + ".com", strings.Repeat("a", 64) + ".com", "longer than 63"},
	}
	for _, tc := range tests {
		_, err := Parse("permissions.network", tc.in)
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want an *Error", tc.in, err)
			continue
		}
		msg := err.Error()
		if pe.Entry != tc.entry || !strings.Contains(msg, tc.reason) ||
			!strings.HasPrefix(msg, "permissions.network: ") || !strings.Contains(msg, "want none, outbound") {
			t.Errorf("Parse(%q) error %q (entry %q), want entry %q and %q, the field and the fix", tc.in, msg, pe.Entry, tc.entry, tc.reason)
		}
	}
	many := make([]string, MaxDomains+1)
	for i := range many {
		many[i] = "h" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + ".example.com"
		many[i] = strings.Repeat("a", i/26+1) + many[i]
	}
	if _, err := Parse("network", strings.Join(many, ",")); !errors.Is(err, ErrInvalid) {
		t.Errorf("%d domains: %v, want refused", len(many), err)
	}
}

func TestZeroPolicyIsNone(t *testing.T) {
	var p Policy
	if p.Mode != None || p.String() != "none" || p.AllowsName("example.com") {
		t.Fatalf("zero policy %v allows something", p)
	}
}

func TestAllowsName(t *testing.T) {
	p := MustParse("example.com,*.example.org")
	tests := []struct {
		host string
		want bool
	}{
		{"example.com", true},
		{"EXAMPLE.com.", true},
		{"www.example.com", false},
		{"example.org", false},
		{"a.example.org", true},
		{"a.b.example.org", true},
		{"evilexample.org", false},
		{"example.org.evil.com", false},
		{"*.example.org", false},
		{"93.184.215.14", false},
		{"::1", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := p.AllowsName(tc.host); got != tc.want {
			t.Errorf("AllowsName(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
	if !MustParse("outbound").AllowsName("anything.example") || MustParse("none").AllowsName("example.com") {
		t.Error("outbound must allow and none refuse every name")
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct{ agent, plugin, want string }{
		{"none", "outbound", "none"},
		{"outbound", "none", "none"},
		{"outbound", "outbound", "outbound"},
		{"outbound", "a.com,b.com", "a.com,b.com"},
		{"a.com,b.com", "outbound", "a.com,b.com"},
		{"a.com,b.com", "b.com,c.com", "b.com"},
		{"a.com", "c.com", "none"},
		{"*.example.com", "api.example.com,other.org", "api.example.com"},
		{"api.example.com", "*.example.com", "api.example.com"},
		{"*.example.com", "*.api.example.com", "*.api.example.com"},
		{"*.example.com", "example.com", "none"},
		{"*.example.com,x.example.com", "*.example.com", "*.example.com"},
	}
	for _, tc := range tests {
		got, err := NarrowSettings("network", tc.agent, "permissions.network", tc.plugin)
		if err != nil {
			t.Fatalf("NarrowSettings(%q, %q): %v", tc.agent, tc.plugin, err)
		}
		if got.String() != tc.want {
			t.Errorf("Narrow(%q, %q) = %q, want %q", tc.agent, tc.plugin, got, tc.want)
		}
		// Narrowing never widens: every name the result allows, both allow.
		a, b := MustParse(tc.agent), MustParse(tc.plugin)
		for _, name := range []string{"a.com", "b.com", "c.com", "api.example.com", "x.api.example.com", "example.com", "other.org"} {
			if got.AllowsName(name) && (!a.AllowsName(name) || !b.AllowsName(name)) {
				t.Errorf("Narrow(%q, %q) allows %s, which one side refuses", tc.agent, tc.plugin, name)
			}
		}
		if rev := Narrow(b, a); rev.String() != got.String() {
			t.Errorf("Narrow is not symmetric for %q, %q: %q vs %q", tc.agent, tc.plugin, got, rev)
		}
	}
	_, err := NarrowSettings("network", "outbound", "permissions.network", "10.0.0.1")
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "permissions.network: ") {
		t.Errorf("a bad plugin setting: %v, want an error naming permissions.network", err)
	}
}

func TestNarrowDoesNotAlias(t *testing.T) {
	a := MustParse("a.com,b.com")
	n := Narrow(MustParse("outbound"), a)
	n.Domains[0] = "changed.com"
	if a.Domains[0] != "a.com" {
		t.Fatal("Narrow returned the input's slice")
	}
}

func TestIsDenied(t *testing.T) {
	for _, s := range []string{"10.0.2.2", "10.0.2.3", "127.0.0.1", "0.0.0.0", "169.254.169.254", "172.20.1.1",
		"192.168.64.1", "100.100.100.100", "224.0.0.251", "255.255.255.255",
		"::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1", "fec0::2", "::ffff:10.0.2.2", "::ffff:127.0.0.1", "ff02::1",
		"64:ff9b::a00:202", "64:ff9b::7f00:1", "2002:a00:202::1", "2002:7f00:1::", "2001:0:4136:e378:8000:63bf:f5ff:fdfd"} {
		if !IsDenied(netip.MustParseAddr(s)) {
			t.Errorf("IsDenied(%s) = false", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "1.1.1.1", "2606:4700::1111", "::ffff:1.1.1.1", "100.128.0.1", "192.0.2.10",
		"2001:4860:4860::8888", "2003::1", "64:ff9b:2::1"} {
		if IsDenied(netip.MustParseAddr(s)) {
			t.Errorf("IsDenied(%s) = true", s)
		}
	}
	if !IsDenied(netip.Addr{}) {
		t.Error("the invalid address must be denied")
	}
	// nftables interval sets refuse overlapping elements: keep them disjoint.
	d := Denied()
	for i, p := range d {
		for _, q := range d[i+1:] {
			if p.Overlaps(q) {
				t.Errorf("denied ranges %s and %s overlap", p, q)
			}
		}
	}
	if !slices.ContainsFunc(d, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr("169.254.169.254")) }) {
		t.Error("metadata address not denied")
	}
}
