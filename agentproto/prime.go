package agentproto

import (
	"encoding/json"
	"fmt"
)

// PrimeCodec encodes and decodes a value of each message a boot's first
// calls carry (the hello, an exec and their envelopes), so the JSON
// codec's per-type state exists before the host's first request. The
// guest agent runs it beside its boot: under emulation the first use of
// each type costs milliseconds that the first call would otherwise wait
// for.
func PrimeCodec() error {
	for _, v := range []any{
		&requestEnvelope{Body: json.RawMessage(`{}`)},
		&responseEnvelope{Body: json.RawMessage(`{}`), Error: &WireError{}},
		&HelloRequest{}, &HelloResponse{BootPhases: []BootPhase{{}}},
		&ExecRequest{Limits: &Limits{}}, &ExecStarted{}, &ExitStatus{}, &SignalFrame{},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("prime %T: %w", v, err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("prime %T: %w", v, err)
		}
	}
	return nil
}
