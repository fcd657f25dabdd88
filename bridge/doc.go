// Package bridge will hold the host API bridge: the server that lets code
// inside the VM reach host services (secrets, config, inference, agent
// dispatch, memory, events) over the agent channel, with per-agent
// identity. The channel already supports guest-initiated calls
// (agentproto: either side opens streams); the bridge itself is not built
// yet, and the bridge diagnostic says so rather than passing.
package bridge
