package bridge

import (
	"context"
	"errors"
	"net/http"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// StatusOf is the HTTP status of a host error, read from its class alone
// (agentproto.Class): every sentinel of the stores and services the
// bridge calls has one, so no package's sentinels are listed here. The
// most specific class comes first, as in agentproto's wire codes.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, agentproto.ErrEscape), errors.Is(err, agentproto.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, agentproto.ErrQuota):
		return http.StatusInsufficientStorage
	case errors.Is(err, agentproto.ErrNotFound), errors.Is(err, agentproto.ErrNoSuchUser):
		return http.StatusNotFound
	case errors.Is(err, agentproto.ErrExists):
		return http.StatusConflict
	case errors.Is(err, agentproto.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, agentproto.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, agentproto.ErrBusy):
		return http.StatusTooManyRequests
	case errors.Is(err, agentproto.ErrUpstream):
		return http.StatusBadGateway
	case errors.Is(err, agentproto.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, agentproto.ErrUnavailable), errors.Is(err, agentproto.ErrUnsupported),
		errors.Is(err, agentproto.ErrSessionEnded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
