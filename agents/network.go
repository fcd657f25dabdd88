package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// NetworkSetting is an agent's network policy as stored and shown. It
// reads the boolean of earlier versions (true: outbound, false: none), so
// an old agents.json keeps working and is rewritten in the new form by the
// next change.
type NetworkSetting string

// UnmarshalJSON accepts a string or the old boolean.
func (n *NetworkSetting) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true", "false":
		*n = NetworkSetting(netpolicy.Migrate(string(b) == "true"))
		return nil
	case "null":
		*n = netpolicy.SettingNone
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("network: %s is neither a string nor a boolean", b)
	}
	*n = NetworkSetting(s)
	return nil
}

// NetworkPolicy parses the agent's network setting. A bad setting is a
// *ValidationError naming the field and what to write instead.
func (a Agent) NetworkPolicy() (netpolicy.Policy, error) {
	p, err := netpolicy.Parse("network", string(a.AutonomousExec.Network))
	if err != nil {
		var pe *netpolicy.Error
		if errors.As(err, &pe) {
			return netpolicy.Policy{}, &ValidationError{Field: "network", Got: fmt.Sprintf("%q %s", pe.Entry, pe.Reason), Want: netpolicy.Want}
		}
		return netpolicy.Policy{}, err
	}
	return p, nil
}

// SetNetwork validates s and stores it in canonical form.
func (ae *AutonomousExec) SetNetwork(s string) error {
	p, err := Agent{AutonomousExec: AutonomousExec{Network: NetworkSetting(s)}}.NetworkPolicy()
	if err != nil {
		return err
	}
	ae.Network = NetworkSetting(p.String())
	return nil
}
