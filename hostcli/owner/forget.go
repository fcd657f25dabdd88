package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/config"
)

// ForgetAgent deletes what the host keeps for a removed agent under its
// slug and the agent itself could read back: its memories and its bridge
// config. A later agent of the same name gets the same slug and must
// start without them. Its events and log lines stay: they are the user's
// record of what it did, and no agent reads them.
func ForgetAgent(ctx context.Context, p config.Paths, slug string) error {
	var errs []error
	if mem, err := OpenMemory(ctx, p); err != nil {
		errs = append(errs, fmt.Errorf("its memories: %w", err))
	} else if _, err := mem.RemoveAll(ctx, slug); err != nil {
		errs = append(errs, fmt.Errorf("its memories: %w", err))
	}
	if err := bridgeConfig(p).RemoveAgent(slug); err != nil {
		errs = append(errs, fmt.Errorf("its bridge config: %w", err))
	}
	return errors.Join(errs...)
}
