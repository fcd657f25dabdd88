package vm

import (
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
)

func TestBootParamsNetwork(t *testing.T) {
	for _, tc := range []struct {
		network, config string
		want            bootparams.Network
		cmdline         string
	}{
		{NetworkOutbound, "", bootparams.DefaultNAT, "osaurus.ip=10.0.2.15/24 osaurus.gw=10.0.2.2 osaurus.dns=10.0.2.3"},
		{NetworkOutbound, NetworkConfigStatic, bootparams.DefaultNAT, "osaurus.ip=10.0.2.15/24"},
		{NetworkOutbound, NetworkConfigDHCP, bootparams.DHCPNAT, "osaurus.net=dhcp"},
		{NetworkNone, "", bootparams.Network{}, "osaurus.net=none"},
		{NetworkNone, NetworkConfigDHCP, bootparams.Network{}, "osaurus.net=none"},
	} {
		name := tc.config
		if name == "" {
			name = "default"
		}
		t.Run(tc.network+"/"+name, func(t *testing.T) {
			s := validSpec()
			s.Network, s.NetworkConfig = tc.network, tc.config
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			p := s.BootParams("", 1024)
			if p.Network != tc.want {
				t.Errorf("network %+v, want %+v", p.Network, tc.want)
			}
			if got := p.Encode(); !strings.Contains(got, tc.cmdline) {
				t.Errorf("cmdline %q lacks %q", got, tc.cmdline)
			}
		})
	}
}

func TestValidateNetworkConfig(t *testing.T) {
	s := validSpec()
	s.NetworkConfig = "bootp"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "network config") {
		t.Errorf("Validate() = %v, want an error naming the network config", err)
	}
}
