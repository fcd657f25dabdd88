package bootparams

import (
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, p := range []Params{
		{RootDevice: "/dev/vda", Shares: []Share{{"workspace", "/workspace"}, {"output", "/output"}},
			Network: DefaultNAT, SerialPort: "org.osaurus.agent.0"},
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

func TestParseRejects(t *testing.T) {
	for _, c := range []string{
		"osaurus.share=workspace",
		"osaurus.share=:/x",
		"osaurus.share=ws:relative",
		"osaurus.ip=10.0.2.15",
		"osaurus.vsock=-1",
		"osaurus.net=bridge",
	} {
		if _, err := Parse(c); err == nil {
			t.Errorf("Parse(%q) accepted", c)
		}
	}
}
