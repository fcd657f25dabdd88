package filelock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExcludesUntilUnlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Acquire(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// A second holder in this process is excluded: flock is per open file.
	if _, err := TryAcquire(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire on a held lock: %v, want ErrLocked", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("gave up")
	cancel(stop)
	if _, err := Acquire(ctx, path); !errors.Is(err, stop) {
		t.Fatalf("Acquire with an ended ctx on a held lock: %v, want the ctx's cause", err)
	}

	got := make(chan error, 1)
	go func() {
		l2, err := Acquire(context.Background(), path)
		if err == nil {
			l2.Unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v while the lock was held", err)
	default:
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire after Unlock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waiting 10 s after Unlock")
	}
	l3, err := TryAcquire(path)
	if err != nil {
		t.Fatalf("TryAcquire on a free lock: %v", err)
	}
	l3.Unlock()
}
