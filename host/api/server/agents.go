package server

import "github.com/osaurus/osaurus-sandbox/agentproto"

// agentOps registers the handlers of api.AgentOps.
func (s *Server) agentOps(m *agentproto.Mux) {
}
