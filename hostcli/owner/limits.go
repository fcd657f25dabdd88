package owner

import (
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// Limits are the rate windows, per-turn command counts and the package
// install lock of one owner process. Every tools environment in it (the
// MCP servers' tool host, the bridge's agent runner and its plugin
// creation) counts against the same ones, so no way in starts an agent
// with a fresh quota or runs a second package manager beside another's.
// The zero Limits gives each environment its own.
type Limits struct {
	Exec    *limit.ExecLimiter
	Rate    *limit.RateLimiter
	Install *tools.InstallLock
}

// NewLimits returns limits with the default windows.
func NewLimits() Limits {
	return Limits{Exec: limit.NewExecLimiter(limit.ExecOptions{}), Rate: limit.NewRateLimiter(limit.RateOptions{}), Install: tools.NewInstallLock()}
}

func (l Limits) apply(o tools.Options) tools.Options {
	if l.Exec != nil {
		o.Exec = l.Exec
	}
	if l.Rate != nil {
		o.Rate = l.Rate
	}
	if l.Install != nil {
		o.Install = l.Install
	}
	return o
}
