package server

import "github.com/osaurus/osaurus-sandbox/agentproto"

// dataOps registers the handlers of api.DataOps.
func (s *Server) dataOps(m *agentproto.Mux) {
}
