package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// MaxValueBytes bounds a secret's value. A longer one is refused, never
// cut: a truncated key would be stored and reported stored, then fail.
const MaxValueBytes = 64 << 10

func checkValue(key, value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%w: the value of %s is empty", ErrInvalid, key)
	case len(value) > MaxValueBytes:
		return fmt.Errorf("%w: the value of %s is %d bytes, more than the %d a secret may hold; nothing was stored", ErrInvalid, key, len(value), MaxValueBytes)
	}
	return nil
}

// readMarks returns the agents marked for removal.
func (s *Store) readMarks() ([]string, error) {
	if s.Marks == "" {
		return nil, nil
	}
	b, err := os.ReadFile(s.Marks)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): delete it after removing the secrets it lists by hand", s.Marks, err)
	}
	return names, nil
}

func (s *Store) writeMarks(names []string) error {
	if len(names) == 0 {
		if err := os.Remove(s.Marks); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.Marks), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(names)
	return atomicfile.WriteFile(s.Marks, b, 0o600)
}

// mark records that agent's secrets are to be deleted (under s.mu).
func (s *Store) mark(agent string) error {
	if s.Marks == "" {
		return errors.New("no place to mark them for removal")
	}
	names, err := s.readMarks()
	if err != nil {
		return err
	}
	if slices.Contains(names, agent) {
		return nil
	}
	return s.writeMarks(append(names, agent))
}

// settle deletes the secrets of agent when they are marked for removal,
// before anything reads or adds one: a later agent of the same name must
// not inherit them. Until the keychain lets them go, the agent's secrets
// are unavailable. Called under s.mu.
func (s *Store) settle(ctx context.Context, agent string) error {
	names, err := s.readMarks()
	if err != nil || !slices.Contains(names, agent) {
		return err
	}
	if _, err := s.removeAll(ctx, agent); err != nil {
		return fmt.Errorf("%w: the secrets of a removed agent named %s are still to be deleted and could not be: %w", ErrUnavailable, agent, err)
	}
	return s.writeMarks(slices.DeleteFunc(names, func(n string) bool { return n == agent }))
}
