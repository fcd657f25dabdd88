package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/store/memory"
)

// ForgetAgent deletes what the host keeps for a removed agent under its
// slug and the agent itself could read back: its memories (mem; nil when
// the database can't open) and its bridge config. A later agent of the
// same name gets the same slug and must start without them. Its events
// and log lines stay: they are the user's record of what it did, and no
// agent reads them.
func ForgetAgent(ctx context.Context, mem *memory.Store, cfg *ConfigStore, slug string) error {
	var errs []error
	if mem == nil {
		errs = append(errs, errors.New("its memories: the memory database is unavailable"))
	} else if _, err := mem.RemoveAll(ctx, slug); err != nil {
		errs = append(errs, fmt.Errorf("its memories: %w", err))
	}
	if err := cfg.RemoveAgent(slug); err != nil {
		errs = append(errs, fmt.Errorf("its bridge config: %w", err))
	}
	return errors.Join(errs...)
}
