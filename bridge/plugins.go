package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// PluginCreator registers a plugin an agent sent (POST /api/plugin/create)
// through the same pipeline as the sandbox_plugin_register tool.
// agent is the caller's name from the kernel (its slug); *tools.Env
// satisfies it.
type PluginCreator interface {
	CreatePlugin(ctx context.Context, agent string, recipe []byte) (*tools.Registered, error)
}

// createPlugin is POST /api/plugin/create (plugin JSON) →
// {"status":"installed", plugin_id, plugin_name, tools:[{name, description}], network}.
// 403 without autonomous exec and pluginCreate; 400 naming the field for
// an invalid recipe (bad JSON, validation, the setup allowlist, a declared
// secret the agent lacks), with every problem in "problems"; 429 over the
// "http" quota; 503 when the VM is not running; 409 when the id is a
// plugin the agent did not create; 500 when the install failed.
func (s *Server) createPlugin(w http.ResponseWriter, r *http.Request) {
	if s.o.Plugins == nil {
		writeError(w, http.StatusServiceUnavailable, "plugin creation is not available in this app")
		return
	}
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", MaxBody))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	res, err := s.o.Plugins.CreatePlugin(r.Context(), agentOf(r), body)
	if err != nil {
		pluginError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// pluginError answers a registration failure with its status.
func pluginError(w http.ResponseWriter, err error) {
	var (
		ie  *plugins.InvalidError
		rej *limit.Rejected
		ee  *envelope.Error
	)
	switch {
	case errors.As(err, &ie) && len(ie.Problems) > 0:
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"error": err.Error(), "field": ie.Problems[0].Field, "fix": ie.Problems[0].Fix, "problems": ie.Problems,
		})
	case errors.As(err, &rej):
		w.Header().Set("Retry-After", strconv.Itoa(int(rej.RetryAfter.Seconds()+0.999)))
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.As(err, &ee) && ee.Kind == envelope.Unavailable:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case StatusOf(err) == http.StatusInternalServerError:
		writeError(w, http.StatusInternalServerError, "plugin create: "+err.Error())
	default:
		writeError(w, StatusOf(err), err.Error())
	}
}
