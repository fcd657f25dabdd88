package bootparams

import (
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, p := range []Params{
		{RootDevice: "/dev/vda", Shares: []Share{{"workspace", "/workspace"}, {"output", "/output"}},
			Network: DefaultNAT, SerialPort: "org.osaurus.agent.0"},
		{RootDevice: "/dev/vda", Network: DHCPNAT, VsockPort: 1024},
		{RootDevice: "/dev/vda", VsockPort: 1024, Debug: true},
	} {
		got, err := Parse("console=ttyS0 quiet " + p.Encode() + " panic=-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, p)
		}
	}
}

func TestEncodeNetwork(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       Network
		enabled bool
		want    string
	}{
		{"none", Network{}, false, "osaurus.net=none"},
		{"static", DefaultNAT, true, "osaurus.ip=10.0.2.15/24 osaurus.gw=10.0.2.2 osaurus.dns=10.0.2.3"},
		{"dhcp", DHCPNAT, true, "osaurus.net=dhcp"},
		// DHCP wins: a static address beside it would be a contradiction
		// on the command line.
		{"dhcp with stray address", Network{DHCP: true, Address: DefaultNAT.Address}, true, "osaurus.net=dhcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.n.Enabled(); got != tc.enabled {
				t.Errorf("Enabled() = %v, want %v", got, tc.enabled)
			}
			if got := (Params{Network: tc.n}).Encode(); got != tc.want {
				t.Errorf("Encode() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, c := range []string{
		"osaurus.share=workspace",
		"osaurus.share=:/x",
		"osaurus.share=ws:relative",
		"osaurus.ip=10.0.2.15",
		"osaurus.vsock=-1",
		"osaurus.net=bridge",
		"osaurus.net=DHCP",
	} {
		if _, err := Parse(c); err == nil {
			t.Errorf("Parse(%q) accepted", c)
		}
	}
}

// A command line asking for both DHCP and a static address is reported,
// and the guest still gets a usable network: DHCP.
func TestParseDHCPAndStatic(t *testing.T) {
	p, err := Parse("osaurus.root=/dev/vda osaurus.net=dhcp osaurus.ip=10.0.2.15/24 osaurus.gw=10.0.2.2 osaurus.vsock=1024")
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("err = %v, want one naming both settings", err)
	}
	want := Params{RootDevice: "/dev/vda", Network: DHCPNAT, VsockPort: 1024}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v, want %+v", p, want)
	}
}
