package tools

import (
	"context"
	"errors"
	"testing"
)

// ctxStore is a store that takes ctx (as secrets.Store does) and answers
// only with it: its plain calls fail the test.
type ctxStore struct{ t *testing.T }

func (s ctxStore) Get(string, string) (string, error) {
	s.t.Error("Get without the call's ctx")
	return "", nil
}

func (s ctxStore) Set(string, string, string) error {
	s.t.Error("Set without the call's ctx")
	return nil
}

func (ctxStore) GetContext(ctx context.Context, _, _ string) (string, error) { return "", ctx.Err() }

func (ctxStore) SetContext(ctx context.Context, _, _, _ string) error { return ctx.Err() }

// The secret tools read and write with the tool call's ctx when the
// store takes one: a forwarded request (secretStore client) ends with
// the call.
func TestSecretToolsPassTheirContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := secretGet(ctx, ctxStore{t}, "alice", "TOKEN"); !errors.Is(err, context.Canceled) {
		t.Errorf("secretGet = %v", err)
	}
	if err := secretPut(ctx, ctxStore{t}, "alice", "TOKEN", "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("secretPut = %v", err)
	}
}
