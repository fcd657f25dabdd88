package owner

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

// The memory and event databases live beside the bridge's other state.
// One Store per file and process, so an event emitted through the bridge
// wakes the MCP sessions of the same process at once.
var (
	storesMu     sync.Mutex
	memoryStores = map[string]*memory.Store{}
	eventStores  = map[string]*events.Store{}
)

// MemoryDB and EventsDB are where a data dir keeps them.
func MemoryDB(p config.Paths) string { return filepath.Join(p.Root, "bridge", "memory.db") }

// EventsDB see MemoryDB.
func EventsDB(p config.Paths) string { return filepath.Join(p.Root, "bridge", "events.db") }

// OpenMemory returns the process's memory store of a data dir.
func OpenMemory(ctx context.Context, p config.Paths) (*memory.Store, error) {
	storesMu.Lock()
	defer storesMu.Unlock()
	path := MemoryDB(p)
	if s := memoryStores[path]; s != nil {
		return s, nil
	}
	s, err := memory.Open(ctx, path, memory.Options{})
	if err != nil {
		return nil, err
	}
	memoryStores[path] = s
	return s, nil
}

// OpenEvents returns the process's event log of a data dir.
func OpenEvents(ctx context.Context, p config.Paths) (*events.Store, error) {
	storesMu.Lock()
	defer storesMu.Unlock()
	path := EventsDB(p)
	if s := eventStores[path]; s != nil {
		return s, nil
	}
	s, err := events.Open(ctx, path, events.Options{})
	if err != nil {
		return nil, err
	}
	eventStores[path] = s
	return s, nil
}

// EventsOrNil is the event log for MCP servers: without it, sessions
// just get no event notifications.
func EventsOrNil(ctx context.Context, p config.Paths, logf func(string, ...any)) *events.Store {
	s, err := OpenEvents(ctx, p)
	if err != nil {
		if logf != nil {
			logf("mcp: no event notifications: %v", err)
		}
		return nil
	}
	return s
}
