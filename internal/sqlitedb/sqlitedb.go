// Package sqlitedb opens the app's SQLite databases with the cgo-free
// driver, so macOS and Linux builds need no C toolchain.
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Open opens (creating if needed) the database at path and applies
// schema. WAL lets the app write while the CLI reads; the busy timeout
// makes a second process wait for a lock instead of failing at once.
func Open(ctx context.Context, path, schema string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	// Writers take the lock when their transaction begins, so two
	// processes never deadlock upgrading read locks.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w (if the file is damaged, move it away and it is created again)", path, err)
	}
	// The file holds agents' data: owner only.
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
