package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

var (
	agentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	keyRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// BadKeyError is a config key or agent name the store refuses.
type BadKeyError struct{ What, Value, Fix string }

func (e *BadKeyError) Error() string {
	fix := e.Fix
	if fix == "" {
		fix = "use 1-128 letters, digits, '_', '.' or '-'"
	}
	return fmt.Sprintf("%s %q is not valid: %s", e.What, e.Value, fix)
}

func checkAgent(agent string) error {
	if !agentRE.MatchString(agent) {
		return &BadKeyError{What: "agent name", Value: agent}
	}
	return nil
}

// ConfigStore is per-agent key/value config, one JSON file per agent,
// replaced atomically on every write.
type ConfigStore struct {
	Dir string
	mu  sync.Mutex
}

func (c *ConfigStore) file(agent string) string { return filepath.Join(c.Dir, agent+".json") }

func (c *ConfigStore) load(agent string) (map[string]string, error) {
	b, err := os.ReadFile(c.file(agent))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w (fix or delete the file)", c.file(agent), err)
	}
	return m, nil
}

// pluginRE is a plugin id as the guest names a plugin's caller.
var pluginRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// scopedKey is where key is kept for plugin (the agent's own scope when
// plugin is empty): a plugin's values live under "<plugin>/", which no
// key a caller names can reach, since keys have no '/'.
func scopedKey(plugin, key string) (string, error) {
	if !keyRE.MatchString(key) {
		return "", &BadKeyError{What: "config key", Value: key}
	}
	if plugin == "" {
		return key, nil
	}
	if !pluginRE.MatchString(plugin) {
		return "", &BadKeyError{What: "plugin id", Value: plugin, Fix: "a plugin id is lower-case letters, digits and '-'"}
	}
	return plugin + "/" + key, nil
}

// Get returns an agent's config value and whether it is set.
func (c *ConfigStore) Get(agent, key string) (string, bool, error) {
	return c.GetIn(agent, "", key)
}

// GetIn returns a config value of the agent's plugin (of the agent
// itself when plugin is empty). Each plugin's commands have a scope of
// their own, so an agent's commands can't read or change what its
// plugins keep, nor one plugin another's.
func (c *ConfigStore) GetIn(agent, plugin, key string) (string, bool, error) {
	if err := checkAgent(agent); err != nil {
		return "", false, err
	}
	key, err := scopedKey(plugin, key)
	if err != nil {
		return "", false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.load(agent)
	if err != nil {
		return "", false, err
	}
	v, ok := m[key]
	return v, ok, nil
}

// Set stores an agent's config value, within MaxConfigValue,
// MaxConfigKeys and MaxConfigBytes (a *LimitError otherwise).
func (c *ConfigStore) Set(agent, key, value string) error {
	return c.SetIn(agent, "", key, value)
}

// SetIn stores a config value of the agent's plugin (of the agent itself
// when plugin is empty; see GetIn). The plugins' values count against
// their agent's bounds.
func (c *ConfigStore) SetIn(agent, plugin, key, value string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	key, err := scopedKey(plugin, key)
	if err != nil {
		return err
	}
	if len(value) > MaxConfigValue {
		return tooLarge("the config value is %d bytes, over the limit of %d bytes per value (MaxConfigValue); keep large data in a file in your home", len(value), MaxConfigValue)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.load(agent)
	if err != nil {
		return err
	}
	if _, ok := m[key]; !ok && len(m) >= MaxConfigKeys {
		return quotaFull("the agent already has %d config keys, the limit (MaxConfigKeys); overwrite an existing key instead", len(m))
	}
	m[key] = value
	if n := configBytes(m); n > MaxConfigBytes {
		return quotaFull("the agent's config would be %d bytes, over the limit of %d bytes per agent (MaxConfigBytes); overwrite large values with shorter ones", n, MaxConfigBytes)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(c.file(agent), append(b, '\n'), 0o600)
}

func configBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// Usage is how many keys an agent's config has and their bytes (keys and
// values), for `agent show`.
func (c *ConfigStore) Usage(agent string) (keys, bytes int, err error) {
	if err := checkAgent(agent); err != nil {
		return 0, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.load(agent)
	if err != nil {
		return 0, 0, err
	}
	return len(m), configBytes(m), nil
}

// RemoveAgent deletes an agent's config, for a removed agent: a later
// agent of the same name must not inherit it.
func (c *ConfigStore) RemoveAgent(agent string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Remove(c.file(agent)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// LogStore is the per-agent log buffer: one file per agent, trimmed to
// its newest half once it passes MaxBytes, so it is shared by every
// process (the app appends, `osaurus-sandbox logs` reads).
type LogStore struct {
	Dir      string
	MaxBytes int64 // default DefaultLogBytes
	mu       sync.Mutex
}

// LogFile is where an agent's log buffer lives.
func (l *LogStore) LogFile(agent string) string { return filepath.Join(l.Dir, agent+".log") }

// Append adds one line (already scrubbed of secrets) of at most
// MaxLogLine bytes.
func (l *LogStore) Append(agent, level, msg string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	if len(msg) > MaxLogLine {
		return tooLarge("the log message is %d bytes, over the limit of %d bytes per message (MaxLogLine); log a summary, or write the details to a file", len(msg), MaxLogLine)
	}
	switch level = strings.ToLower(strings.TrimSpace(level)); level {
	case "":
		level = "info"
	case "debug", "info", "warn", "warning", "error":
	default:
		return &BadKeyError{What: "log level", Value: level, Fix: "use debug, info, warn or error"}
	}
	// One entry per line: a message can't forge further entries.
	msg = strings.ReplaceAll(strings.ReplaceAll(msg, "\r", `\r`), "\n", `\n`)
	line := fmt.Sprintf("%s %s %s\n", time.Now().UTC().Format(time.RFC3339), level, msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(l.LogFile(agent), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(line)
	st, serr := f.Stat()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return err
	}
	max := l.Max()
	if st.Size() > max {
		return l.trim(agent, max/2)
	}
	return nil
}

func (l *LogStore) trim(agent string, keep int64) error {
	b, err := os.ReadFile(l.LogFile(agent))
	if err != nil {
		return err
	}
	if int64(len(b)) > keep {
		b = b[int64(len(b))-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return atomicfile.WriteFile(l.LogFile(agent), b, 0o600)
}

// Max is the size an agent's log buffer is kept under.
func (l *LogStore) Max() int64 {
	if l.MaxBytes <= 0 {
		return DefaultLogBytes
	}
	return l.MaxBytes
}

// Size is the size of an agent's log buffer, for `agent show`.
func (l *LogStore) Size(agent string) (int64, error) {
	if err := checkAgent(agent); err != nil {
		return 0, err
	}
	st, err := os.Stat(l.LogFile(agent))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Read returns an agent's log buffer.
func (l *LogStore) Read(agent string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	b, err := os.ReadFile(l.LogFile(agent))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}
