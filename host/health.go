package host

import (
	"encoding/json"
	"net"
	"net/http"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// Health paths on the owner's MCP HTTP address, for service managers and
// probes that speak HTTP but not the control protocol (systemd's
// ExecStartPost, a Kubernetes httpGet probe). They carry no agent data
// and need no token; they are not activity, so a probe every few seconds
// never keeps an idle VM awake.
const (
	// HealthPath answers 200 while this owner serves: a liveness probe.
	HealthPath = "/healthz"
	// ReadyPath answers 200 when a tool call would run at once (the VM
	// runs, asleep or awake, and its guest answers), else 503; the body
	// says which state the VM is in.
	ReadyPath = "/readyz"
)

// Readiness is ReadyPath's JSON answer.
type Readiness struct {
	Ready    bool          `json:"ready"`
	State    control.State `json:"state"`
	Sleeping bool          `json:"sleeping,omitempty"`
	Reason   string        `json:"reason,omitempty"`
}

// ready is what ReadyPath answers for st.
func ready(st control.Status) Readiness {
	r := Readiness{State: st.State, Sleeping: st.SleepingSince != nil, Reason: st.Reason}
	switch {
	case st.State != control.Running:
		if r.Reason == "" {
			r.Reason = "the VM is " + string(st.State) + "; `osaurus-sandbox start` starts it (a tool call would, more slowly)"
		}
	case st.Unresponsive != nil:
		r.Reason = "the VM runs but its guest agent stopped answering; the watchdog restarts it"
	default:
		r.Ready = true
	}
	return r
}

// healthMux serves the health paths and sends every other request to
// mcp, counted as activity.
func (h *Host) healthMux(mcp http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, req *http.Request) {
		if !loopbackHost(w, req) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, req *http.Request) {
		if !loopbackHost(w, req) {
			return
		}
		r := ready(h.m.Status())
		w.Header().Set("Content-Type", "application/json")
		if !r.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(r)
	})
	mux.Handle("/", h.use.handler(mcp))
	return mux
}

// loopbackHost refuses a request not addressed to a loopback name: a web
// page whose name was rebound to 127.0.0.1 reaches this port, but its
// requests carry that name, and the VM's state is none of its business.
func loopbackHost(w http.ResponseWriter, r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return true
	}
	http.Error(w, "forbidden: ask http://127.0.0.1:PORT/", http.StatusForbidden)
	return false
}
